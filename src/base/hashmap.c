/* hashmap.c: the map's tables, growth, removal and visits (see hashmap.h;
 * find and put are inline there). */
#include "base/hashmap.h"

#include <stdlib.h>

/* The smallest table of a map's own, and the most keys a map may be asked
 * to hold (twice that, rounded up to a power of two, in slots of 16 bytes
 * must fit a size_t). */
#define MIN_SLOTS 16
#define MAX_KEYS (SIZE_MAX / (4 * sizeof(vf__hashmap_slot)))

/* The table of every map that has none of its own: two empty slots (home
 * is the top bit of the hash), room for no key, never written. */
static const vf__hashmap_slot no_table[2];

void vf__hashmap_init(vf__hashmap *m, void *(*calloc_fn)(size_t, size_t))
{
    *m = (vf__hashmap){.slots = (vf__hashmap_slot *)no_table,
                       .mask = 1,
                       .shift = 63,
                       .calloc_fn = calloc_fn};
}

void vf__hashmap_destroy(vf__hashmap *m)
{
    if (m->limit > 0)
        free(m->slots);
    vf__hashmap_init(m, m->calloc_fn);
}

/* Slots a table needs for `n` keys (at most half full; n <= MAX_KEYS). */
static size_t slots_for(size_t n)
{
    size_t nslots = MIN_SLOTS;
    while (nslots / 2 < n)
        nslots *= 2;
    return nslots;
}

/* Moves the keys into a new table of `nslots` (a power of two, at least
 * MIN_SLOTS, with room for them all at half load). */
static int rehash(vf__hashmap *m, size_t nslots)
{
    void *(*alloc)(size_t, size_t) = m->calloc_fn ? m->calloc_fn : calloc;
    vf__hashmap_slot *slots = alloc(nslots, sizeof *slots);
    if (slots == NULL)
        return VF_ENOMEM;
    unsigned shift = 64u - (unsigned)__builtin_ctzll(nslots);
    for (size_t i = 0; i <= m->mask; i++) {
        if (m->slots[i].key == 0)
            continue;
        size_t j = vf__hashmap_home(m->slots[i].key, shift);
        while (slots[j].key != 0)
            j = (j + 1) & (nslots - 1);
        slots[j] = m->slots[i];
    }
    if (m->limit > 0)
        free(m->slots);
    m->slots = slots;
    m->mask = nslots - 1;
    m->limit = nslots / 2;
    m->shift = shift;
    return 0;
}

int vf__hashmap_reserve(vf__hashmap *m, size_t n)
{
    if (n > MAX_KEYS)
        return VF_ENOMEM;
    if (n > m->limit) {
        int rc = rehash(m, slots_for(n));
        if (rc != 0)
            return rc;
    }
    if (n > m->reserved)
        m->reserved = n;
    return 0;
}

int vf__hashmap_put_slow(vf__hashmap *m, uint64_t key, uint64_t value,
                         uint64_t *stored)
{
    if (key == 0)
        return VF_EINVAL;
    if (m->count >= m->limit) {
        if (m->count >= MAX_KEYS)
            return VF_ENOMEM;
        int rc = rehash(m, slots_for(m->count + 1));
        if (rc != 0)
            return rc;
    }
    return vf__hashmap_put(m, key, value, stored);
}

void vf__hashmap_clear(vf__hashmap *m)
{
    if (m->count == 0)
        return;
    size_t most = m->count > m->reserved ? m->count : m->reserved;
    if ((m->mask + 1) / 16 > slots_for(most)) {
        size_t reserved = m->reserved;
        vf__hashmap_destroy(m);
        m->reserved = reserved;
        return;
    }
    /* Keys only (an empty slot's value means nothing), eight at a time:
     * a table of a map's own has a multiple of MIN_SLOTS slots. */
    vf__hashmap_slot *s = m->slots, *end = s + m->mask + 1;
    for (; s < end; s += 8) {
        s[0].key = s[1].key = s[2].key = s[3].key = 0;
        s[4].key = s[5].key = s[6].key = s[7].key = 0;
    }
    m->count = 0;
}

bool vf__hashmap_remove(vf__hashmap *m, uint64_t key)
{
    if (key == 0)
        return false;
    size_t mask = m->mask;
    size_t i = vf__hashmap_home(key, m->shift);
    while (m->slots[i].key != key) {
        if (m->slots[i].key == 0)
            return false;
        i = (i + 1) & mask;
    }
    /* Backward shift: slot i is a hole. A key further along the run moves
     * into it unless its home lies cyclically in (i, j], where a search
     * for it starts past the hole; the hole moves to where it was. */
    for (size_t j = (i + 1) & mask; m->slots[j].key != 0; j = (j + 1) & mask) {
        size_t home = vf__hashmap_home(m->slots[j].key, m->shift);
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (vf__hashmap_slot){0, 0};
    m->count--;
    return true;
}

bool vf__hashmap_next(const vf__hashmap *m, size_t *pos, uint64_t *key,
                      uint64_t *value)
{
    for (size_t i = *pos; i <= m->mask; i++) {
        if (m->slots[i].key == 0)
            continue;
        if (key != NULL)
            *key = m->slots[i].key;
        if (value != NULL)
            *value = m->slots[i].value;
        *pos = i + 1;
        return true;
    }
    *pos = m->mask + 1;
    return false;
}
