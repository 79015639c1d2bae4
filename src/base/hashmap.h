/*
 * hashmap.h: a map from a 64-bit key (a pointer or an id) to a 64-bit value
 * (an index, or a pointer), the one hash table of varflow: bulk's union of
 * vars (core/bulk.c), the profiler's interned names (profile/record.c), the
 * HTML report's table of names (profile/html.c) and libvarflow-mpi's
 * variable records (mpi/vars.c).
 *
 * Open addressing with linear probing: a key's home slot is the top bits
 * of key * 2^64/phi (Fibonacci hashing, so that aligned pointers and ids
 * in sequence spread evenly), and a key sits at its home or in the run of
 * full slots that follows it. The table is a power of two, at most half
 * full, so a search ends within a few slots; remove shifts the rest of the
 * run back (no tombstones), so that "no empty slot between a key's home
 * and the key" always holds. Key 0 marks an empty slot and is never in a
 * map. A map without a table of its own points at a shared, read-only
 * table of two empty slots with room for no key (limit 0), so that find
 * and put need no test for "no table yet": put's first key takes the slow
 * path, which allocates.
 *
 * Find and put are inline (bulk adds every var of every op it collects);
 * they copy the map's fields into locals before storing into the table,
 * since a slot's uint64_t may alias the map's size_t fields.
 *
 * A map is not thread-safe: its user's lock guards it. Nothing here
 * aborts: a failed allocation is VF_ENOMEM and leaves the map as it was.
 * Memory comes from the map's `calloc_fn` (core and profile pass
 * vf__calloc, so that vf__testing_fail_alloc reaches it; NULL: calloc) and
 * goes back with free().
 *
 * hashmap.c stands on libc alone: libvarflow-mpi compiles it into its own
 * objects (hidden), since libvarflow.so exports no vf__* symbol. So nothing
 * here may call into the rest of libvarflow (no VF__ASSERT, no vf__fail).
 */
#ifndef VF_HASHMAP_H
#define VF_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <varflow.h>

typedef struct vf__hashmap_slot {
    uint64_t key; /* 0: empty */
    uint64_t value;
} vf__hashmap_slot;

typedef struct vf__hashmap {
    vf__hashmap_slot *slots; /* the table (the shared empty one: limit 0) */
    size_t mask;             /* its slots - 1 */
    size_t count;            /* keys in the map */
    size_t limit;            /* keys it takes before it grows: half its
                                slots; 0 for the shared empty table */
    size_t reserved;         /* the most keys reserve was asked for */
    unsigned shift;          /* 64 - log2(slots): the hash's top bits */
    void *(*calloc_fn)(size_t count, size_t size); /* NULL: calloc */
} vf__hashmap;

/* An empty map that will allocate with `calloc_fn` (NULL: calloc). Every
 * map is made by init before any other call. Allocates nothing. */
void vf__hashmap_init(vf__hashmap *m, void *(*calloc_fn)(size_t, size_t));

/* Frees the table; the map is empty (as after init, same calloc_fn) and
 * may be used again. The values are the caller's to free first. Never
 * fails. */
void vf__hashmap_destroy(vf__hashmap *m);

/* Makes room for `n` keys in all: until the map holds more than `n`, no
 * put allocates. Allocates (and rehashes) when the table is too small;
 * never shrinks it. A table reserved over its fill (say a quarter full)
 * also makes searches shorter. 0, or VF_ENOMEM with the map unchanged. */
int vf__hashmap_reserve(vf__hashmap *m, size_t n);

/* Empties the map in one pass over its table, which it keeps for the
 * next fill; unless the table grew over 16 times larger than both this
 * fill and the most reserve asked for (one rare big fill), which is freed
 * instead, so that later clears stay short (the next put or reserve
 * allocates again). Never fails, never allocates. */
void vf__hashmap_clear(vf__hashmap *m);

/* Removes `key`, shifting the rest of its run back; whether it was there.
 * Never allocates. */
bool vf__hashmap_remove(vf__hashmap *m, uint64_t key);

/* Whether removing every key costs less than a clear: fewer keys than one
 * slot in 16 (a caller that holds the list of its keys may then remove
 * them one by one). Reads the map only. */
static inline bool vf__hashmap_sparse(const vf__hashmap *m)
{
    return m->count < (m->mask + 1) / 16;
}

/* Visits the map: the first entry at or after slot *pos into *key and
 * *value (either may be NULL), *pos past it; false at the end. Start with
 * *pos = 0; the map must not change during the visit. Never allocates. */
bool vf__hashmap_next(const vf__hashmap *m, size_t *pos, uint64_t *key,
                      uint64_t *value);

/* put's slow path (hashmap.c), for a full table (the shared empty one
 * included) or key 0: grows the table, then puts; as put. */
int vf__hashmap_put_slow(vf__hashmap *m, uint64_t key, uint64_t value,
                         uint64_t *stored);

/* The slot where the search for `key` starts. */
static inline size_t vf__hashmap_home(uint64_t key, unsigned shift)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> shift);
}

/* Where `key`'s value is (valid until the next put, remove, clear or
 * reserve), or NULL when `key` is not in the map (key 0 never is). Never
 * allocates. */
static inline uint64_t *vf__hashmap_find(const vf__hashmap *m, uint64_t key)
{
    vf__hashmap_slot *slots = m->slots;
    size_t mask = m->mask;
    for (size_t i = vf__hashmap_home(key, m->shift);; i = (i + 1) & mask) {
        if (slots[i].key == 0)
            return NULL;
        if (slots[i].key == key)
            return &slots[i].value;
    }
}

/*
 * Adds `key` with `value`, unless `key` is there already. *stored (when
 * not NULL) gets the value the map holds for `key` now: the one it had, or
 * `value`. 1: the key was there (its value unchanged); 0: it was added.
 * Allocates only to add a key to a half-full table (see reserve).
 * VF_EINVAL for key 0; VF_ENOMEM (the map unchanged).
 */
static inline int vf__hashmap_put(vf__hashmap *m, uint64_t key, uint64_t value,
                                  uint64_t *stored)
{
    vf__hashmap_slot *slots = m->slots;
    size_t mask = m->mask, count = m->count;
    for (size_t i = vf__hashmap_home(key, m->shift);; i = (i + 1) & mask) {
        if (slots[i].key == 0) {
            if (__builtin_expect(count >= m->limit || key == 0, 0))
                return vf__hashmap_put_slow(m, key, value, stored);
            slots[i].key = key;
            slots[i].value = value;
            m->count = count + 1;
            if (stored != NULL)
                *stored = value;
            return 0;
        }
        if (slots[i].key == key) {
            if (stored != NULL)
                *stored = slots[i].value;
            return 1;
        }
    }
}

/*
 * Strings as keys. A string's key is its hash (FNV-1a: the strings are
 * short names), never 0; when another string already holds that key, the
 * string takes the next one (vf__hashmap_next_key), and so on. Its user
 * keeps the strings beside the map (the value says where) and compares:
 * a string is found by walking the keys from its hash until the value is
 * its own, or a key is missing (it is not in the map). Strings must then
 * not be removed one by one (a removed key would cut the walk short).
 */
static inline uint64_t vf__hashmap_string_key(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h != 0 ? h : 1;
}

/* The key a string tries after `key` (0 is skipped). */
static inline uint64_t vf__hashmap_next_key(uint64_t key)
{
    return key + 1 != 0 ? key + 1 : 1;
}

#endif /* VF_HASHMAP_H */
