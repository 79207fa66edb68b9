// The ONNX node tests of the data-movement ops whose shape-setting inputs (Reshape's shape, Slice's starts, Resize's
// scales, ...) are graph inputs there. qdeploy needs those at build time, so the conformance runner reports them
// unsupported; here they are bound as constants (as an exported model has them) and the results must match.
#include <gtest/gtest.h>

#include "ops/nn_test_util.h"

namespace qd {
namespace {

struct NodeCase {
  const char* dir;
  std::vector<int> constants;  // graph inputs made constants
};

class MovementNodeTest : public ::testing::TestWithParam<NodeCase> {};

TEST_P(MovementNodeTest, MatchesOnnxReference) {
  QD_EXPECT_NODE_TEST(std::string("node/") + GetParam().dir, GetParam().constants);
}

const NodeCase kCases[] = {
    {"test_reshape_allowzero_reordered", {1}}, {"test_reshape_extended_dims", {1}},
    {"test_reshape_negative_dim", {1}}, {"test_reshape_negative_extended_dims", {1}},
    {"test_reshape_one_dim", {1}}, {"test_reshape_reduced_dims", {1}},
    {"test_reshape_reordered_all_dims", {1}}, {"test_reshape_reordered_last_dims", {1}},
    {"test_reshape_zero_and_negative_dim", {1}}, {"test_reshape_zero_dim", {1}},
    {"test_slice", {1, 2, 3, 4}}, {"test_slice_default_axes", {1, 2}}, {"test_slice_default_steps", {1, 2, 3}},
    {"test_slice_end_out_of_bounds", {1, 2, 3, 4}}, {"test_slice_neg", {1, 2, 3, 4}},
    {"test_slice_neg_steps", {1, 2, 3, 4}}, {"test_slice_negative_axes", {1, 2, 3}},
    {"test_slice_start_out_of_bounds", {1, 2, 3, 4}},
    {"test_squeeze", {1}}, {"test_squeeze_negative_axes", {1}},
    {"test_unsqueeze_axis_0", {1}}, {"test_unsqueeze_axis_1", {1}}, {"test_unsqueeze_axis_2", {1}},
    {"test_unsqueeze_negative_axes", {1}}, {"test_unsqueeze_three_axes", {1}}, {"test_unsqueeze_two_axes", {1}},
    {"test_unsqueeze_unsorted_axes", {1}},
    {"test_split_variable_parts_1d", {1}}, {"test_split_variable_parts_2d", {1}},
    {"test_split_variable_parts_default_axis", {1}}, {"test_split_zero_size_splits", {1}},
    {"test_expand_dim_changed", {1}}, {"test_expand_dim_unchanged", {1}},
    {"test_tile", {1}}, {"test_tile_precomputed", {1}},
    {"test_constant_pad", {1, 2}}, {"test_edge_pad", {1}}, {"test_reflect_pad", {1}},
    {"test_constantofshape_float_ones", {0}}, {"test_constantofshape_int_shape_zero", {0}},
    {"test_constantofshape_int_zeros", {0}},
    {"test_range_float_type_positive_delta", {0, 1, 2}}, {"test_range_int32_type_negative_delta", {0, 1, 2}},
    {"test_onehot_negative_indices", {1}}, {"test_onehot_with_axis", {1}}, {"test_onehot_with_negative_axis", {1}},
    {"test_onehot_without_axis", {1}},
    {"test_top_k", {1}}, {"test_top_k_negative_axis", {1}}, {"test_top_k_smallest", {1}},
    {"test_compress_0", {1}}, {"test_compress_1", {1}}, {"test_compress_default_axis", {1}},
    {"test_compress_negative_axis", {1}}, {"test_nonzero_example", {0}},
    {"test_upsample_nearest", {1}},
    {"test_resize_downsample_scales_cubic", {1}}, {"test_resize_downsample_scales_cubic_A_n0p5_exclude_outside", {1}},
    {"test_resize_downsample_scales_cubic_align_corners", {1}}, {"test_resize_downsample_scales_linear", {1}},
    {"test_resize_downsample_scales_linear_align_corners", {1}}, {"test_resize_downsample_scales_nearest", {1}},
    {"test_resize_downsample_sizes_cubic", {1}}, {"test_resize_downsample_sizes_linear_pytorch_half_pixel", {1}},
    {"test_resize_downsample_sizes_nearest", {1}}, {"test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn", {1}},
    {"test_resize_tf_crop_and_resize", {1, 2}}, {"test_resize_upsample_scales_cubic", {1}},
    {"test_resize_upsample_scales_cubic_A_n0p5_exclude_outside", {1}},
    {"test_resize_upsample_scales_cubic_align_corners", {1}}, {"test_resize_upsample_scales_cubic_asymmetric", {1}},
    {"test_resize_upsample_scales_linear", {1}}, {"test_resize_upsample_scales_linear_align_corners", {1}},
    {"test_resize_upsample_scales_nearest", {1}}, {"test_resize_upsample_sizes_cubic", {1}},
    {"test_resize_upsample_sizes_nearest", {1}}, {"test_resize_upsample_sizes_nearest_ceil_half_pixel", {1}},
    {"test_resize_upsample_sizes_nearest_floor_align_corners", {1}},
    {"test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric", {1}},
};

INSTANTIATE_TEST_SUITE_P(Onnx, MovementNodeTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<NodeCase>& i) { return std::string(i.param.dir).substr(5); });

}  // namespace
}  // namespace qd
