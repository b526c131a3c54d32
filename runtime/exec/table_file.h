/* table_file.h - persistence of a learnt step trace (tensors + accesses) in
 * a JSON file keyed by a signature of the registered tensors, so that a later
 * run with the same tensors can skip the profiling warm-up. Internal. */
#ifndef TENCACHE_TABLE_FILE_H
#define TENCACHE_TABLE_FILE_H

#include <stdint.h>

#include "plan/plan.h"

/* The format version written and the only one accepted. */
#define TC_TABLE_VERSION 1

/* Signature of the registered tensors: FNV-1a 64 over (bytes as 8 bytes
 * little-endian, role as 1 byte) of each tensor, in order. */
uint64_t tc_table_signature(const struct tc_trace *tr);
/* Write tr (tensors + accesses) to path atomically (a temporary file in the
 * same directory, fsync, rename). 0 or -errno. */
int tc_table_save(const char *path, uint64_t sig, const struct tc_trace *tr);
/* Load into an EMPTY trace (tc_trace_init'ed). -ENOENT: no file; -ESTALE:
 * the file's signature is not sig; -EINVAL: malformed, another version, or a
 * field out of range (the trace then fails nothing: every id, role, phase and
 * flag is checked, the signature is recomputed from the tensors read, and
 * tc_trace_validate must pass). On error tr is left empty. */
int tc_table_load(const char *path, uint64_t sig, struct tc_trace *tr);

#endif
