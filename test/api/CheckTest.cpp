// KILN_CHECK and KILN_DCHECK (kiln/Base/Check.h), and the checks of the public headers
// that use them: a failed check names file, line, condition and message, then aborts.

#include "kiln/Base/Check.h"
#include "kiln/Base/Tensor.h"
#include "kiln/Graph/Graph.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

int counter = 0;
int bump() { return ++counter; }

} // namespace

TEST(Check, PassingCheckEvaluatesConditionOnceAndMessageNever) {
  counter = 0;
  int messages = 0;
  KILN_CHECK(bump() == 1) << "message " << ++messages;
  EXPECT_EQ(counter, 1);
  EXPECT_EQ(messages, 0);
}

TEST(CheckDeathTest, FailingCheckPrintsFileLineConditionAndMessage) {
  int two = 2;
  EXPECT_DEATH(KILN_CHECK(two + 1 == 4) << "two is " << two,
               "CheckTest\\.cpp:[0-9]+: check failed: two \\+ 1 == 4: two is 2");
}

TEST(CheckDeathTest, FailingCheckWithoutMessage) {
  bool ok = false;
  EXPECT_DEATH(KILN_CHECK(ok), "CheckTest\\.cpp:[0-9]+: check failed: ok\n");
}

TEST(CheckDeathTest, DCheckFollowsNDEBUG) {
  counter = 0;
  KILN_DCHECK(bump() == 1);
#ifdef NDEBUG
  // Compiled but not evaluated.
  EXPECT_EQ(counter, 0);
  KILN_DCHECK(false) << "never reported";
#else
  EXPECT_EQ(counter, 1);
  EXPECT_DEATH(KILN_DCHECK(counter == 5), "check failed: counter == 5");
#endif
}

TEST(CheckDeathTest, CheckUsableAsIfBodyWithoutBraces) {
  // The macro is one expression: an else binds to the if, not inside the macro.
  int taken = 0;
  if (counter >= 0)
    KILN_CHECK(true);
  else
    taken = 1;
  EXPECT_EQ(taken, 0);
}

TEST(CheckDeathTest, GetHandleOfWrongElementTypeAborts) {
  Tensor t(ElemKind::Float, {2});
  EXPECT_DEATH(t.getHandle<int32_t>(),
               "check failed: .*getHandle: tensor of [a-z0-9]+<2> is not stored as the requested");
}

TEST(CheckDeathTest, HandleSetWithWrongCountAborts) {
  Tensor t(ElemKind::Float, {2, 2});
  EXPECT_DEATH(t.getHandle<float>().set({1, 2, 3}), "Handle::set: 3 values for 4 elements");
}

TEST(CheckDeathTest, CastToWrongKindAborts) {
  Module m;
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {2}, "x");
  Node *relu = f->createRelu("relu", NodeValue(x));
  EXPECT_NE(dyn_cast<ReluNode>(relu), nullptr);
  EXPECT_EQ(dyn_cast<SaveNode>(relu), nullptr);
  EXPECT_DEATH(cast<SaveNode>(relu), "check failed: isa<To>\\(n\\): invalid cast");
}
