/* table.c — the one op table: name and backward of every op, indexed by sf_op. */
#include "ops_internal.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(SF_OP_COUNT == 34, "update sf_op_table when adding an op");

const sf_op_info sf_op_table[SF_OP_COUNT] = {
    [SF_OP_NONE] = {"none", NULL},
    [SF_OP_LINEAR] = {"linear", sf_linear_backward},
    [SF_OP_MATMUL] = {"matmul", sf_matmul_backward},
    [SF_OP_ADD] = {"add", sf_add_backward},
    [SF_OP_ADD_BROADCAST] = {"add_broadcast", sf_add_broadcast_backward},
    [SF_OP_MUL_BROADCAST] = {"mul_broadcast", sf_mul_broadcast_backward},
    [SF_OP_SCALE] = {"scale", sf_scale_backward},
    [SF_OP_GELU] = {"gelu", sf_gelu_backward},
    [SF_OP_GELU_TANH] = {"gelu_tanh", sf_gelu_tanh_backward},
    [SF_OP_RELU] = {"relu", sf_relu_backward},
    [SF_OP_ELU1] = {"elu1", sf_elu1_backward},
    [SF_OP_DROPOUT] = {"dropout", sf_dropout_backward},
    [SF_OP_DROP_PATH] = {"drop_path", sf_drop_path_backward},
    [SF_OP_RESHAPE] = {"reshape", sf_reshape_backward},
    [SF_OP_PERMUTE] = {"permute", sf_permute_backward},
    [SF_OP_HEADS_SPLIT] = {"heads_split", sf_heads_split_backward},
    [SF_OP_HEADS_MERGE] = {"heads_merge", sf_heads_merge_backward},
    [SF_OP_SLICE_TOKENS] = {"slice_tokens", sf_slice_tokens_backward},
    [SF_OP_CONCAT_TOKENS] = {"concat_tokens", sf_concat_tokens_backward},
    [SF_OP_MEAN_TOKENS] = {"mean_tokens", sf_mean_tokens_backward},
    [SF_OP_SOFTMAX] = {"softmax", sf_softmax_backward},
    [SF_OP_LAYERNORM] = {"layernorm", sf_layernorm_backward},
    [SF_OP_BATCHNORM2D] = {"batchnorm2d", sf_batchnorm2d_backward},
    [SF_OP_L1NORM_TOKENS] = {"l1norm_tokens", sf_l1norm_tokens_backward},
    [SF_OP_L2NORM_TOKENS] = {"l2norm_tokens", sf_l2norm_tokens_backward},
    [SF_OP_SIMA] = {"sima", sf_sima_backward},
    [SF_OP_MSA] = {"msa", sf_msa_backward},
    [SF_OP_XCA] = {"xca", sf_xca_backward},
    [SF_OP_GAUSS_KERNEL] = {"gauss_kernel", sf_gauss_kernel_backward},
    [SF_OP_NR_PINV] = {"nr_pinv", sf_nr_pinv_backward},
    [SF_OP_SOFT_SYMNORM] = {"soft_symnorm", sf_soft_symnorm_backward},
    [SF_OP_CONV2D] = {"conv2d", sf_conv2d_backward},
    [SF_OP_AVGPOOL2D] = {"avgpool2d", sf_avgpool2d_backward},
    [SF_OP_CROSS_ENTROPY] = {"cross_entropy", sf_cross_entropy_backward},
};

int sf_break_backward(const char *op_name) {
    static const char *which = NULL;
    static int looked = 0;
    if (!looked) {
        which = getenv("SFVIT_BREAK_BACKWARD");
        looked = 1;
    }
    return which && strcmp(which, op_name) == 0;
}
