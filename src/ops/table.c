/* table.c — the op table, generated from the op list (SF_OPS in ops.h): name and backward of
 * every op, indexed by sf_op; the tape entry point of every op; the names of the ops layer's
 * other lists (SimA orders, Newton–Raphson initializations). */
#include "ops_internal.h"

#include <stdlib.h>
#include <string.h>

const sf_op_info sf_op_table[SF_OP_COUNT] = {
    [SF_OP_NONE] = {"none", NULL},
#define SF_OP_ENTRY(ID, name) [SF_OP_##ID] = {#name, sf_##name##_backward},
    SF_OPS(SF_OP_ENTRY)
#undef SF_OP_ENTRY
};

#define SF_NAME(ID, name) #name,
const char *const sf_sima_order_names[SF_SIMA_COUNT + 1] = {SF_SIMA_ORDERS(SF_NAME) NULL};
const char *const sf_nr_init_names[SF_NR_COUNT + 1] = {SF_NR_INITS(SF_NAME) NULL};
#undef SF_NAME

const char *sf_op_name(int op) { return op > SF_OP_NONE && op < SF_OP_COUNT ? sf_op_table[op].name : "?"; }

sf_node *sf_tape_push(sf_ctx *g, sf_op op, sf_tensor *out, sf_tensor *const *in, int n_in) {
    SF_ASSERT(op > SF_OP_NONE && op < SF_OP_COUNT, "op %d", (int)op);
    return sf_tape_record(g, op, sf_op_table[op].backward, out, in, n_in);
}

int sf_break_backward(const char *op_name) {
    static const char *which = NULL;
    static int looked = 0;
    if (!looked) {
        which = getenv("SFVIT_BREAK_BACKWARD");
        looked = 1;
    }
    return which && strcmp(which, op_name) == 0;
}
