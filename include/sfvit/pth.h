/* pth.h — reading PyTorch `torch.save` files (state_dicts and training checkpoints) without
 * Python (docs/checkpoints.md).
 *
 * Formats: the zip container of PyTorch >= 1.6 (stored entries `<archive>/data.pkl`,
 * `<archive>/data/<key>`; compressed entries are refused) and the legacy raw-pickle format of
 * `torch.save(..., _use_new_zipfile_serialization=False)` / PyTorch < 1.6. The even older tar
 * format is recognized and refused by name.
 *
 * The pickle is run by a small stack machine that knows the opcodes of protocols 0-5 but
 * resolves only a whitelist of globals: collections.OrderedDict, torch._utils
 * _rebuild_tensor(_v2) / _rebuild_parameter(_with_state), torch._tensor._rebuild_from_type_v2
 * and the torch.<Type>Storage classes. Every other global (argparse.Namespace, numpy scalars,
 * ...) becomes an opaque value that is skipped; nothing is ever executed. Tensors (strided,
 * offset, sharing a storage) are gathered into contiguous copies of their own dtype.
 *
 * The result is an sf_st_file (safetensors.h) holding the tensors of the checkpoint's weights:
 * the top-level dict if it holds tensors itself, else the first of "state_dict", "model",
 * "model_state_dict", "module", "net", "params", "model_ema", "state_dict_ema" that does
 * (or the EMA ones first with prefer_ema, or the key given in opts). Nested dicts are
 * flattened with "." (a state_dict is flat already). Metadata: "pth.format" (zip / legacy)
 * and "pth.source" (the key the weights came from, "" for the top level).
 *
 * Bounds: the whole file is read once; the pickle is at most SF_PTH_MAX_PICKLE bytes, nested
 * at most SF_PTH_MAX_DEPTH levels; every storage must lie inside the file and every tensor
 * inside its storage (overflow-checked), and a tensor never has more elements than its
 * storage, so no allocation exceeds a small multiple of the file size. Each problem is one
 * message naming the file and what is wrong.
 */
#ifndef SFVIT_PTH_H
#define SFVIT_PTH_H

#include <stddef.h>

#include "sfvit/safetensors.h"

#define SF_PTH_MAX_PICKLE ((size_t)256 << 20)
#define SF_PTH_MAX_DEPTH 32

typedef enum sf_ckpt_format {
    SF_CKPT_SAFETENSORS = 0,
    SF_CKPT_PTH_ZIP,     /* torch.save, PyTorch >= 1.6 */
    SF_CKPT_PTH_LEGACY,  /* torch.save raw pickle stream, PyTorch < 1.6 */
    SF_CKPT_PTH_TAR,     /* torch.save tar, PyTorch < 0.4: refused */
    SF_CKPT_UNKNOWN,
} sf_ckpt_format;

/* Guesses the format from the first bytes of a file (n >= 0 bytes given). */
sf_ckpt_format sf_ckpt_sniff(const unsigned char *head, size_t n);

typedef struct sf_pth_opts {
    const char *key;  /* take the weights from this top-level key (NULL: automatic) */
    int prefer_ema;   /* automatic choice prefers model_ema / state_dict_ema */
} sf_pth_opts;

/* Reads a torch.save file into f (see above). opts may be NULL. On any problem prints one
 * error naming the file and returns -1 (f is left empty; sf_st_close is still safe). */
int sf_pth_open(sf_st_file *f, const char *path, const sf_pth_opts *opts);
/* Same on bytes in memory; `name` is used in messages. */
int sf_pth_open_mem(sf_st_file *f, const void *data, size_t size, const char *name, const sf_pth_opts *opts);

#endif
