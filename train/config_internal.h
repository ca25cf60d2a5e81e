/* config_internal.h — the key table shared by the config's parser (config.c) and its
 * printers (config_print.c). Not a public header. */
#ifndef SFVIT_CONFIG_INTERNAL_H
#define SFVIT_CONFIG_INTERNAL_H

#include <stddef.h>

#include "sfvit/config.h"

typedef enum ktype {
    K_INT, K_U64, K_FLOAT, K_BOOL, K_STR, K_ENUM, K_SENUM, K_NAME,
    K_INT_LIST, K_FLOAT_LIST, K_ENUM_LIST
} ktype;

/* How a list's length is kept: in an int field (counted), as the number of leading
 * non-zero entries (zero-padded), or fixed (a single value is repeated). */
typedef enum lmode { L_NONE = 0, L_COUNTED, L_ZEROPAD, L_FIXED } lmode;

typedef struct key_def {
    const char *key;
    ktype type;
    size_t off;
    size_t size;              /* strings: buffer bytes; lists: capacity */
    lmode lm;
    size_t count_off;         /* L_COUNTED: offset of the int count */
    double min, max;
    const char *const *names; /* enum names (index = value) or allowed strings; NULL-ended */
    const char *help;
} key_def;

/* Every key, in section order (config.c). */
extern const key_def config_keys[];
extern const int config_n_keys;

/* A range bound as text: integers without decimals ("1024"), others as %g. */
void config_fmt_range(char *buf, size_t n, double v);

#endif
