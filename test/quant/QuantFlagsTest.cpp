// The tools' quantization flags (src/tools/QuantFlags.cpp): the weight schema that
// --per-channel, --schema and --weight-schema give together.

#include "../../src/tools/QuantFlags.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

/// The weight schema the flags give (the library's effectiveWeightSchema of quantOptions),
/// and whether --weight-schema was passed on as set.
std::pair<QuantSchema, bool> weightSchemaOf(const std::string &schema, bool perChannel,
                                            const std::string &weightSchema) {
  tools::QuantFlags q;
  q.schema = schema;
  q.perChannel = perChannel;
  q.weightSchema = weightSchema;
  Expected<QuantizationOptions> o = tools::quantOptions(q);
  EXPECT_TRUE(bool(o)) << o.getError().toString();
  if (!o)
    return {QuantSchema::Asymmetric, false};
  return {effectiveWeightSchema(*o), o->weightSchema.has_value()};
}

// --per-channel alone with the asymmetric schema: offset-0 (symmetric) weights, the
// library's default (the tools leave weightSchema unset); an explicit --weight-schema wins;
// other schemas and per-tensor weights keep the schema's own.
TEST(QuantFlags, PerChannelWeightSchemaDefault) {
  using S = QuantSchema;
  using P = std::pair<S, bool>;
  EXPECT_EQ(weightSchemaOf("asymmetric", true, ""), P(S::Symmetric, false));
  EXPECT_EQ(weightSchemaOf("asymmetric", true, "asymmetric"), P(S::Asymmetric, true));
  EXPECT_EQ(weightSchemaOf("asymmetric", true, "power2"), P(S::SymmetricWithPower2Scale, true));
  EXPECT_EQ(weightSchemaOf("asymmetric", false, ""), P(S::Asymmetric, false));
  EXPECT_EQ(weightSchemaOf("power2", true, ""), P(S::SymmetricWithPower2Scale, false));
  EXPECT_EQ(weightSchemaOf("symmetric-uint8", true, ""), P(S::SymmetricWithUInt8, false));
  EXPECT_EQ(weightSchemaOf("symmetric", true, ""), P(S::Symmetric, false));
}

// A bad --weight-schema is an error naming it, with or without --per-channel.
TEST(QuantFlags, BadWeightSchema) {
  for (bool perChannel : {false, true}) {
    tools::QuantFlags q;
    q.perChannel = perChannel;
    q.weightSchema = "lopsided";
    Expected<QuantizationOptions> o = tools::quantOptions(q);
    ASSERT_FALSE(bool(o));
    EXPECT_NE(o.getError().toString().find("lopsided"), std::string::npos)
        << o.getError().toString();
  }
}

} // namespace
} // namespace kiln
