// The GPT-2 mapping: QKV regrouping and Conv1D transposes on hand-checked values,
// round trips, the vocabulary and position tables, and the architecture check.
#include "trainer/hf/gpt2_mapping.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/hf/hf_test_util.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::PatternParameters;
using testing_util::SmallGpt2Config;
using testing_util::WithZeroPadding;

// hidden 4, 2 heads of dimension 2, one layer, vocabulary 5 padded to 8, 3 positions.
Gpt2Dims TinyDims() {
  Gpt2Dims dims;
  dims.num_layers = 1;
  dims.hidden = 4;
  dims.heads = 2;
  dims.vocab = 5;
  dims.padded_vocab = 8;
  dims.positions = 3;
  return dims;
}

TEST(Gpt2MappingTest, QkvRowsRegroupFromPerHeadToQkvBlocks) {
  // Grouped rows: q0 q0 k0 k0 v0 v0 q1 q1 k1 k1 v1 v1 (rows 0..11).
  // HF columns:   q0 q0 q1 q1 | k0 k0 k1 k1 | v0 v0 v1 v1.
  const Gpt2Dims dims = TinyDims();
  GlobalTensorMap tensors = PatternParameters(dims);
  std::vector<float>& bias = tensors["layers.0.attention.qkv.bias"];
  for (int r = 0; r < 12; ++r) bias[r] = float(r);
  std::vector<float>& weight = tensors["layers.0.attention.qkv.weight"];  // [12, 4]
  for (int r = 0; r < 12; ++r) {
    for (int i = 0; i < 4; ++i) weight[r * 4 + i] = float(10 * r + i);
  }
  const absl::StatusOr<HfTensorMap> hf = ConveyorToHfGpt2(tensors, dims);
  ASSERT_TRUE(hf.ok()) << hf.status();

  const HfTensor& c_attn_bias = hf->at("transformer.h.0.attn.c_attn.bias");
  EXPECT_THAT(c_attn_bias.data, ElementsAre(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11));
  const HfTensor& c_attn = hf->at("transformer.h.0.attn.c_attn.weight");
  EXPECT_THAT(c_attn.shape, ElementsAre(4, 12));  // Conv1D: [in, out]
  EXPECT_THAT(c_attn.data,
              ElementsAreArray<float>({0, 10, 60, 70, 20, 30, 80, 90, 40, 50, 100, 110,  //
                                       1, 11, 61, 71, 21, 31, 81, 91, 41, 51, 101, 111,  //
                                       2, 12, 62, 72, 22, 32, 82, 92, 42, 52, 102, 112,  //
                                       3, 13, 63, 73, 23, 33, 83, 93, 43, 53, 103, 113}));
}

TEST(Gpt2MappingTest, RowAndColumnIndexMapsAreInverse) {
  for (int64_t heads : {1, 2, 12}) {
    for (int64_t head_dim : {1, 3, 64}) {
      for (int64_t r = 0; r < 3 * heads * head_dim; ++r) {
        const int64_t c = GroupedQkvRowToHfColumn(r, heads, head_dim);
        ASSERT_EQ(HfColumnToGroupedQkvRow(c, heads, head_dim), r);
      }
    }
  }
}

TEST(Gpt2MappingTest, Conv1DWeightsAreTransposed) {
  const Gpt2Dims dims = TinyDims();
  const GlobalTensorMap tensors = PatternParameters(dims);
  const absl::StatusOr<HfTensorMap> hf = ConveyorToHfGpt2(tensors, dims);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const std::vector<float>& fc1 = tensors.at("layers.0.mlp.fc1.weight");  // [16, 4]
  const HfTensor& c_fc = hf->at("transformer.h.0.mlp.c_fc.weight");       // [4, 16]
  EXPECT_THAT(c_fc.shape, ElementsAre(4, 16));
  for (int o = 0; o < 16; ++o) {
    for (int i = 0; i < 4; ++i) ASSERT_EQ(c_fc.data[i * 16 + o], fc1[o * 4 + i]);
  }
  EXPECT_THAT(hf->at("transformer.h.0.mlp.c_proj.weight").shape, ElementsAre(16, 4));
  EXPECT_THAT(hf->at("transformer.h.0.attn.c_proj.weight").shape, ElementsAre(4, 4));
  EXPECT_EQ(hf->at("transformer.h.0.ln_1.weight").data, tensors.at("layers.0.input_norm.weight"));
}

TEST(Gpt2MappingTest, ExportDropsPaddedVocabularyRowsAndLeavesLmHeadTied) {
  const Gpt2Dims dims = TinyDims();
  const GlobalTensorMap tensors = PatternParameters(dims);
  const absl::StatusOr<HfTensorMap> hf = ConveyorToHfGpt2(tensors, dims);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const HfTensor& wte = hf->at("transformer.wte.weight");
  EXPECT_THAT(wte.shape, ElementsAre(5, 4));
  const std::vector<float>& word = tensors.at("embedding.word_embeddings.weight");
  EXPECT_EQ(wte.data, std::vector<float>(word.begin(), word.begin() + 20));
  EXPECT_THAT(hf->at("transformer.wpe.weight").shape, ElementsAre(3, 4));
  EXPECT_EQ(hf->count("lm_head.weight"), 0u);
  EXPECT_EQ(hf->size(), 4u + 12u);
}

TEST(Gpt2MappingTest, RoundTripIsIdentityWithPaddingRowsZeroed) {
  const Config config = SmallGpt2Config();
  const absl::StatusOr<Gpt2Dims> dims = Gpt2DimsFromConfig(config, 64);
  ASSERT_TRUE(dims.ok()) << dims.status();
  const GlobalTensorMap original = PatternParameters(*dims);
  const absl::StatusOr<HfTensorMap> hf = ConveyorToHfGpt2(original, *dims);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const absl::StatusOr<GlobalTensorMap> back = HfToConveyorGpt2(*hf, *dims);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, WithZeroPadding(original, *dims));
}

TEST(Gpt2MappingTest, ImportAcceptsUnprefixedNamesAndSkipsMaskBuffers) {
  // Files saved from GPT2Model (e.g. the published gpt2 weights) have no
  // "transformer." prefix and may carry attn.bias / attn.masked_bias buffers.
  const Gpt2Dims dims = TinyDims();
  const GlobalTensorMap original = PatternParameters(dims);
  const absl::StatusOr<HfTensorMap> prefixed = ConveyorToHfGpt2(original, dims);
  ASSERT_TRUE(prefixed.ok());
  HfTensorMap bare;
  for (const auto& [name, tensor] : *prefixed) bare[name.substr(12)] = tensor;
  bare["h.0.attn.bias"] = {{1, 1, 3, 3}, std::vector<float>(9, 1.0f)};
  bare["h.0.attn.masked_bias"] = {{}, {-1e4f}};
  bare["lm_head.weight"] = bare.at("wte.weight");
  const absl::StatusOr<GlobalTensorMap> back = HfToConveyorGpt2(bare, dims);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, WithZeroPadding(original, dims));
}

TEST(Gpt2MappingTest, ImportTakesTheFirstRowsOfALongerPositionTable) {
  const Gpt2Dims dims = TinyDims();
  const GlobalTensorMap original = PatternParameters(dims);
  absl::StatusOr<HfTensorMap> hf = ConveyorToHfGpt2(original, dims);
  ASSERT_TRUE(hf.ok());
  HfTensor& wpe = (*hf)["transformer.wpe.weight"];
  wpe.shape = {5, 4};
  wpe.data.resize(20, 123.0f);
  const absl::StatusOr<GlobalTensorMap> back = HfToConveyorGpt2(*hf, dims);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->at("embedding.position_embeddings.weight"),
            original.at("embedding.position_embeddings.weight"));

  wpe.shape = {2, 4};
  wpe.data.resize(8);
  const absl::StatusOr<GlobalTensorMap> short_table = HfToConveyorGpt2(*hf, dims);
  EXPECT_EQ(short_table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_table.status().message(), AllOf(HasSubstr("transformer.wpe.weight"),
                                                    HasSubstr("[2, 4]"), HasSubstr("[>= 3, 4]")));
}

TEST(Gpt2MappingTest, ImportNamesMissingUnexpectedAndMisshapedTensors) {
  const Gpt2Dims dims = TinyDims();
  const absl::StatusOr<HfTensorMap> good = ConveyorToHfGpt2(PatternParameters(dims), dims);
  ASSERT_TRUE(good.ok());

  HfTensorMap missing = *good;
  missing.erase("transformer.h.0.ln_2.bias");
  EXPECT_THAT(HfToConveyorGpt2(missing, dims).status().message(),
              AllOf(HasSubstr("transformer.h.0.ln_2.bias"), HasSubstr("missing")));

  HfTensorMap extra = *good;
  extra["transformer.h.1.ln_1.weight"] = {{4}, std::vector<float>(4)};
  EXPECT_THAT(HfToConveyorGpt2(extra, dims).status().message(),
              AllOf(HasSubstr("transformer.h.1.ln_1.weight"), HasSubstr("--num-layers 1")));

  HfTensorMap misshaped = *good;
  misshaped["transformer.h.0.mlp.c_fc.weight"].shape = {16, 4};  // Linear's [out, in]
  EXPECT_THAT(HfToConveyorGpt2(misshaped, dims).status().message(),
              AllOf(HasSubstr("transformer.h.0.mlp.c_fc.weight"), HasSubstr("[16, 4]"),
                    HasSubstr("[4, 16]")));

  HfTensorMap untied = *good;
  untied["lm_head.weight"] = untied.at("transformer.wte.weight");
  untied["lm_head.weight"].data[0] += 1.0f;
  EXPECT_THAT(HfToConveyorGpt2(untied, dims).status().message(),
              HasSubstr("lm_head.weight differs"));
}

TEST(Gpt2MappingTest, ExportNamesMissingOrMissizedTensors) {
  const Gpt2Dims dims = TinyDims();
  GlobalTensorMap tensors = PatternParameters(dims);
  tensors["layers.0.mlp.fc2.bias"].pop_back();
  EXPECT_THAT(ConveyorToHfGpt2(tensors, dims).status().message(),
              AllOf(HasSubstr("layers.0.mlp.fc2.bias"), HasSubstr("3 elements")));
  tensors.erase("final_norm.bias");
  EXPECT_THAT(ConveyorToHfGpt2(tensors, dims).status().message(), HasSubstr("final_norm.bias"));
}

TEST(Gpt2MappingTest, ParameterShapesFollowTheModel) {
  const auto shapes = GptParameterShapes(TinyDims());
  EXPECT_EQ(shapes.size(), 16u);
  EXPECT_THAT(shapes.at("embedding.word_embeddings.weight"), ElementsAre(8, 4));
  EXPECT_THAT(shapes.at("layers.0.attention.qkv.weight"), ElementsAre(12, 4));
  EXPECT_THAT(shapes.at("layers.0.mlp.fc2.weight"), ElementsAre(4, 16));
  EXPECT_EQ(shapes.count("output_layer.weight"), 0u);
}

TEST(Gpt2ArchitectureTest, AcceptsGpt2AndItsAutoSizes) {
  Config config = SmallGpt2Config();
  EXPECT_TRUE(CheckGpt2Architecture(config).ok());
  config.mutable_model()->set_ffn_hidden_size(32);  // = 4h, as the resolver fills it in
  config.mutable_model()->set_num_query_groups(2);
  config.mutable_model()->set_kv_channels(4);
  EXPECT_TRUE(CheckGpt2Architecture(config).ok()) << CheckGpt2Architecture(config);
}

TEST(Gpt2ArchitectureTest, ListsEveryMismatch) {
  Config config = SmallGpt2Config();
  ModelConfig* m = config.mutable_model();
  m->set_position_embedding_type("rope");
  m->set_normalization("RMSNorm");
  m->set_swiglu(true);
  m->set_untie_embeddings_and_output_weights(true);
  m->set_disable_bias_linear(true);
  m->set_num_attention_heads(4);
  m->set_num_query_groups(2);
  m->set_ffn_hidden_size(24);
  m->set_kv_channels(4);
  const absl::Status status = CheckGpt2Architecture(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      status.message(),
      AllOf(HasSubstr("--position-embedding-type is rope"), HasSubstr("--normalization is RMSNorm"),
            HasSubstr("--swiglu"), HasSubstr("--untie-embeddings-and-output-weights"),
            HasSubstr("--disable-bias-linear"), HasSubstr("--num-query-groups is 2"),
            HasSubstr("--ffn-hidden-size is 24"), HasSubstr("--kv-channels is 4")));
  EXPECT_THAT(status.message(), Not(HasSubstr("--vocab-size")));
}

TEST(Gpt2ArchitectureTest, NeedsTheRealVocabularySize) {
  Config config = SmallGpt2Config();
  config.mutable_model()->clear_vocab_size();
  EXPECT_THAT(CheckGpt2Architecture(config).message(), HasSubstr("--vocab-size"));
}

}  // namespace
}  // namespace conveyor
