/* agg_v2: an aggregate module that declares ABI version 2 (refused). */
#define AGG_VERSION 2
#include "agg.c"
