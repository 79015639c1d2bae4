/*
 * json_mini.h: a small, strict JSON parser for tests, independent of the
 * library's own loader (src/profile/load.c), so that a test of a JSON
 * writer does not trust the code under test to read it back.
 *
 * jm_parse() turns a text into a tree of jm_value (objects keep their keys
 * in order, numbers are kept as doubles and as their text); it returns NULL
 * and sets jm_error for anything RFC 8259 does not allow (trailing commas,
 * bad escapes, leading zeros, text after the value, ...). jm_free() frees a
 * tree. Lookups: jm_get (a key of an object), jm_str, jm_num. Meant for
 * test-sized documents (a few MB).
 */
#ifndef VF_TEST_JSON_MINI_H
#define VF_TEST_JSON_MINI_H

#include <stdlib.h>
#include <string.h>

typedef enum jm_type {
    JM_NULL,
    JM_BOOL,
    JM_NUM,
    JM_STR,
    JM_ARR,
    JM_OBJ
} jm_type;

typedef struct jm_value jm_value;
struct jm_value {
    jm_type type;
    double num; /* JM_NUM, JM_BOOL (0/1) */
    char *str;  /* JM_STR; JM_NUM: its text */
    int n;      /* JM_ARR, JM_OBJ: elements */
    jm_value **items;
    char **keys; /* JM_OBJ */
};

static const char *jm_error;
static size_t jm_error_at;

typedef struct jm_in {
    const char *s, *p;
    int depth;
} jm_in;

static inline jm_value *jm_fail_(jm_in *in, const char *what)
{
    if (jm_error == NULL) {
        jm_error = what;
        jm_error_at = (size_t)(in->p - in->s);
    }
    return NULL;
}

static inline void jm_ws_(jm_in *in)
{
    while (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r')
        in->p++;
}

static inline void jm_free(jm_value *v)
{
    if (v == NULL)
        return;
    for (int i = 0; i < v->n; i++) {
        jm_free(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

/* A string's contents (escapes kept as written, \" and \\ resolved). */
static inline char *jm_string_(jm_in *in)
{
    if (*in->p != '"')
        return (char *)jm_fail_(in, "expected a string");
    const char *a = ++in->p;
    for (; *in->p != '"'; in->p++) {
        unsigned char c = (unsigned char)*in->p;
        if (c == 0 || c < 0x20)
            return (char *)jm_fail_(in, "bad character in a string");
        if (c == '\\') {
            in->p++;
            if (*in->p == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (!strchr("0123456789abcdefABCDEF", in->p[k]) ||
                        in->p[k] == 0)
                        return (char *)jm_fail_(in, "bad \\u escape");
            } else if (*in->p == 0 || !strchr("\"\\/bfnrt", *in->p)) {
                return (char *)jm_fail_(in, "bad escape");
            }
        }
    }
    char *out = malloc((size_t)(in->p - a) + 1), *o = out;
    for (const char *c = a; c < in->p; c++) {
        if (*c == '\\' && (c[1] == '"' || c[1] == '\\' || c[1] == '/'))
            c++;
        *o++ = *c;
    }
    *o = 0;
    in->p++;
    return out;
}

static inline jm_value *jm_value_(jm_in *in);

static inline jm_value *jm_new_(jm_type t)
{
    jm_value *v = calloc(1, sizeof *v);
    v->type = t;
    return v;
}

static inline int jm_push_(jm_value *v, char *key, jm_value *item)
{
    if ((v->n & (v->n - 1)) == 0) {
        int cap = v->n ? v->n * 2 : 1;
        v->items = realloc(v->items, (size_t)cap * sizeof *v->items);
        if (v->type == JM_OBJ)
            v->keys = realloc(v->keys, (size_t)cap * sizeof *v->keys);
    }
    v->items[v->n] = item;
    if (v->type == JM_OBJ)
        v->keys[v->n] = key;
    v->n++;
    return 0;
}

static inline jm_value *jm_container_(jm_in *in, int obj)
{
    jm_value *v = jm_new_(obj ? JM_OBJ : JM_ARR);
    in->p++;
    jm_ws_(in);
    if (*in->p == (obj ? '}' : ']')) {
        in->p++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        jm_ws_(in);
        if (obj) {
            if ((key = jm_string_(in)) == NULL)
                break;
            jm_ws_(in);
            if (*in->p++ != ':') {
                free(key);
                in->p--;
                jm_fail_(in, "expected ':'");
                break;
            }
        }
        jm_value *item = jm_value_(in);
        if (item == NULL) {
            free(key);
            break;
        }
        jm_push_(v, key, item);
        jm_ws_(in);
        if (*in->p == ',') {
            in->p++;
            continue;
        }
        if (*in->p == (obj ? '}' : ']')) {
            in->p++;
            return v;
        }
        jm_fail_(in, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        break;
    }
    jm_free(v);
    return NULL;
}

static inline jm_value *jm_value_(jm_in *in)
{
    jm_ws_(in);
    if (++in->depth > 200)
        return jm_fail_(in, "nested too deeply");
    jm_value *v = NULL;
    char c = *in->p;
    if (c == '{' || c == '[') {
        v = jm_container_(in, c == '{');
    } else if (c == '"') {
        char *s = jm_string_(in);
        if (s) {
            v = jm_new_(JM_STR);
            v->str = s;
        }
    } else if (!strncmp(in->p, "true", 4) || !strncmp(in->p, "false", 5)) {
        v = jm_new_(JM_BOOL);
        v->num = c == 't';
        in->p += c == 't' ? 4 : 5;
    } else if (!strncmp(in->p, "null", 4)) {
        v = jm_new_(JM_NULL);
        in->p += 4;
    } else {
        const char *a = in->p;
        if (*in->p == '-')
            in->p++;
        if (*in->p == '0' && in->p[1] >= '0' && in->p[1] <= '9')
            return jm_fail_(in, "leading zero");
        if (*in->p < '0' || *in->p > '9')
            return jm_fail_(in, "unexpected character");
        while (*in->p >= '0' && *in->p <= '9')
            in->p++;
        if (*in->p == '.') {
            in->p++;
            if (*in->p < '0' || *in->p > '9')
                return jm_fail_(in, "digit expected after '.'");
            while (*in->p >= '0' && *in->p <= '9')
                in->p++;
        }
        if (*in->p == 'e' || *in->p == 'E') {
            in->p++;
            if (*in->p == '+' || *in->p == '-')
                in->p++;
            if (*in->p < '0' || *in->p > '9')
                return jm_fail_(in, "digit expected in exponent");
            while (*in->p >= '0' && *in->p <= '9')
                in->p++;
        }
        v = jm_new_(JM_NUM);
        v->str = malloc((size_t)(in->p - a) + 1);
        memcpy(v->str, a, (size_t)(in->p - a));
        v->str[in->p - a] = 0;
        v->num = strtod(v->str, NULL);
    }
    in->depth--;
    return v;
}

/* Parse a whole document; NULL (and jm_error) when it is not valid JSON. */
static inline jm_value *jm_parse(const char *text)
{
    jm_in in = {text, text, 0};
    jm_error = NULL;
    jm_value *v = jm_value_(&in);
    if (v != NULL) {
        jm_ws_(&in);
        if (*in.p != 0) {
            jm_free(v);
            return jm_fail_(&in, "text after the value");
        }
    }
    return v;
}

/* The value of `key` in object `o`, or NULL. */
static inline jm_value *jm_get(const jm_value *o, const char *key)
{
    if (o == NULL || o->type != JM_OBJ)
        return NULL;
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return o->items[i];
    return NULL;
}

/* The string at `key`, or "" when absent or not a string. */
static inline const char *jm_str(const jm_value *o, const char *key)
{
    const jm_value *v = jm_get(o, key);
    return v && v->type == JM_STR ? v->str : "";
}

/* The number at `key`, or -1e300 when absent or not a number. */
static inline double jm_num(const jm_value *o, const char *key)
{
    const jm_value *v = jm_get(o, key);
    return v && (v->type == JM_NUM || v->type == JM_BOOL) ? v->num : -1e300;
}

/* A whole file as a string (NULL when it cannot be read); free() it. */
static inline char *jm_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

#endif /* VF_TEST_JSON_MINI_H */
