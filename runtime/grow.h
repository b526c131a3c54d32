/* grow.h - the growable arrays the runtime's files share (the planner's
 * too, which includes nothing else of the runtime). */
#ifndef TENCACHE_GROW_H
#define TENCACHE_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Room for element nr of array arr (cap elements): doubles it, from min, with
 * the new elements zeroed. 0, or -ENOMEM with the array as it was.
 */
#define TC_GROW(arr, cap, nr, min) ({						\
	int tc_grow_ret = 0;							\
	if ((nr) >= (cap)) {							\
		uint32_t tc_grow_n = (cap) ? 2 * (cap) : (min);			\
		__typeof__(arr) tc_grow_a = realloc((arr), (size_t)tc_grow_n * sizeof(*(arr))); \
		if (tc_grow_a) {						\
			memset(tc_grow_a + (cap), 0,				\
			       (size_t)(tc_grow_n - (cap)) * sizeof(*(arr)));	\
			(arr) = tc_grow_a;					\
			(cap) = tc_grow_n;					\
		} else {							\
			tc_grow_ret = -ENOMEM;					\
		}								\
	}									\
	tc_grow_ret;								\
})

#endif
