/* agg_state: an aggregate module that imports keyed state (refused). */
#define AGG_STATE
#include "agg.c"
