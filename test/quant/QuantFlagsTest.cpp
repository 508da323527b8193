// The tools' quantization flags (src/tools/QuantFlags.cpp): the weight schema that
// --per-channel, --schema and --weight-schema give together.

#include "../../src/tools/QuantFlags.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

std::optional<QuantSchema> weightSchemaOf(const std::string &schema, bool perChannel,
                                          const std::string &weightSchema) {
  tools::QuantFlags q;
  q.schema = schema;
  q.perChannel = perChannel;
  q.weightSchema = weightSchema;
  Expected<QuantizationOptions> o = tools::quantOptions(q);
  EXPECT_TRUE(bool(o)) << o.getError().toString();
  return o ? o->weightSchema : std::nullopt;
}

// --per-channel alone with the asymmetric schema: offset-0 (symmetric) weights; an explicit
// --weight-schema wins; other schemas and per-tensor weights keep the schema's own.
TEST(QuantFlags, PerChannelWeightSchemaDefault) {
  EXPECT_EQ(weightSchemaOf("asymmetric", true, ""), QuantSchema::Symmetric);
  EXPECT_EQ(weightSchemaOf("asymmetric", true, "asymmetric"), QuantSchema::Asymmetric);
  EXPECT_EQ(weightSchemaOf("asymmetric", true, "power2"), QuantSchema::SymmetricWithPower2Scale);
  EXPECT_EQ(weightSchemaOf("asymmetric", false, ""), std::nullopt);
  EXPECT_EQ(weightSchemaOf("power2", true, ""), std::nullopt);
  EXPECT_EQ(weightSchemaOf("symmetric-uint8", true, ""), std::nullopt);
  EXPECT_EQ(weightSchemaOf("symmetric", true, ""), std::nullopt);
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
