/*
 * test_cxx_c_header: the C header, varflow.h, used directly from C++
 * (without varflow.hpp), on every engine kind. Built with -Wall -Wextra
 * -Wpedantic -Werror whatever the tree's settings (tests/CMakeLists.txt),
 * in C++17 by the tree's compiler and in C++20 by the other one
 * (cxx_other_compiler), so a header that is not clean for C++ fails here.
 *
 * - vf_config and vf_op from braces with some fields given (positional in
 *   C++17, designated in C++20) compile without missing-initializer
 *   warnings, and the fields not given are zero;
 * - VF_VARS(a, b, ...) makes a vf_var_list in C++ (no compound literals
 *   there), alive to the end of the full-expression: the seed program
 *   A=2; B=A+1; C=A+2; D=B*C pushed as vf_engine_push(e, {..., VF_VARS(...)})
 *   gives D == 12, each var written once;
 * - vf_var_list_of(array) lists a named array, for an op kept in a
 *   variable; vf_operator_create takes an op the same way as vf_engine_push;
 * - the header included inside extern "C" { }, as C headers often are,
 *   compiles (its C++ part failed: templates and overloads with C
 *   linkage; found by a user tester).
 */
#include <cstdint>
#include <cstdio>
#include <type_traits>

extern "C" {
#include <varflow.h>
}

namespace
{

int failures = 0;
const char *context = "-";

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            std::fprintf(stderr, "%s:%d: check failed: %s [%s]\n", __FILE__,   \
                         __LINE__, #cond, context);                            \
            failures++;                                                        \
        }                                                                      \
    } while (0)

#define CHECK_OK(expr)                                                         \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != 0) {                                                        \
            std::fprintf(stderr, "%s:%d: %s returned %s (%s) [%s]\n",          \
                         __FILE__, __LINE__, #expr, vf_error_name(rc_),        \
                         vf_error_detail(), context);                          \
            failures++;                                                        \
        }                                                                      \
    } while (0)

// The C structs stay what C sees.
static_assert(std::is_standard_layout_v<vf_config> &&
                  std::is_trivially_copyable_v<vf_config>,
              "vf_config");
static_assert(std::is_standard_layout_v<vf_op> &&
                  std::is_trivially_copyable_v<vf_op>,
              "vf_op");

struct cell {
    int value;
    const cell *x, *y;
    char how; // '=': value stays; '+': x + y; '*': x * y
};

int compute(vf_run *run, void *arg)
{
    (void)run;
    cell *c = static_cast<cell *>(arg);
    if (c->how == '+')
        c->value = c->x->value + c->y->value;
    else if (c->how == '*')
        c->value = c->x->value * c->y->value;
    return 0;
}

void zeroed_structs()
{
    vf_config c{};
    CHECK(c.type == VF_ENGINE_DEFAULT && c.cpu_workers == 0 &&
          c.profile_path == nullptr && !c.engine_info && c.bulk_size == 0 &&
          !c.help_on_wait);
    vf_config positional{VF_ENGINE_POOLED, 2};
    CHECK(positional.type == VF_ENGINE_POOLED && positional.cpu_workers == 2 &&
          positional.cpu_priority_workers == 0 &&
          positional.profile_path == nullptr && positional.bulk_size == 0);
    vf_op op{compute};
    CHECK(op.fn == compute && op.async_fn == nullptr && op.arg == nullptr &&
          op.reads.vars == nullptr && op.reads.count == 0 &&
          op.device.type == VF_DEVICE_CPU && op.property == VF_PROP_NORMAL &&
          op.priority == 0 && !op.no_skip && op.name == nullptr);
#if __cplusplus >= 202002L
    vf_config designated{.type = VF_ENGINE_NAIVE, .bulk_size = 4};
    CHECK(designated.type == VF_ENGINE_NAIVE && designated.bulk_size == 4 &&
          designated.cpu_workers == 0 && designated.profile_path == nullptr);
#endif
}

vf_var new_var(vf_engine *e)
{
    vf_var v{};
    CHECK_OK(vf_var_create(e, &v));
    return v;
}

void seed_program(const vf_config &cfg)
{
    vf_engine *e = nullptr;
    CHECK_OK(vf_engine_create(&e, &cfg));
    if (e == nullptr)
        return;
    vf_var a = new_var(e), b = new_var(e), c = new_var(e), d = new_var(e);
    cell A{2, nullptr, nullptr, '='}, B{0, &A, nullptr, '+'},
        C{0, &A, nullptr, '+'}, D{0, &B, &C, '*'};
    cell one{1, nullptr, nullptr, '='}, two{2, nullptr, nullptr, '='};
    B.y = &one;
    C.y = &two;
    // Each list lives until the end of its vf_engine_push statement: enough.
    CHECK_OK(
        vf_engine_push(e, {compute, nullptr, &A, nullptr, {}, VF_VARS(a)}));
    CHECK_OK(vf_engine_push(
        e, {compute, nullptr, &B, nullptr, VF_VARS(a), VF_VARS(b)}));
#if __cplusplus >= 202002L
    CHECK_OK(vf_engine_push(e, {.fn = compute,
                                .arg = &C,
                                .reads = VF_VARS(a),
                                .writes = VF_VARS(c),
                                .name = "C"}));
#else
    CHECK_OK(vf_engine_push(
        e, {compute, nullptr, &C, nullptr, VF_VARS(a), VF_VARS(c)}));
#endif
    // An op kept in a variable lists a named array.
    const vf_var bc[] = {b, c, b};
    vf_op op{};
    op.fn = compute;
    op.arg = &D;
    op.reads = vf_var_list_of(bc);
    op.writes = {&d, 1};
    CHECK(op.reads.count == 3 && op.reads.vars == bc);
    CHECK_OK(vf_engine_push(e, &op));
    CHECK_OK(vf_var_wait(e, d, nullptr));
    CHECK(D.value == 12);
    vf_var all[] = {a, b, c, d};
    for (vf_var v : all) {
        std::uint64_t version = 0;
        CHECK_OK(vf_var_version(e, v, &version));
        CHECK(version == 1);
    }
    // A reusable operator from an op in braces, VF_VARS of five vars.
    vf_operator *opr = nullptr;
    CHECK_OK(vf_operator_create(
        e, {compute, nullptr, &A, nullptr, VF_VARS(a, b, c, d, a), {}}, &opr));
    if (opr != nullptr) {
        CHECK_OK(vf_operator_push(e, opr, 0));
        CHECK_OK(vf_operator_destroy(e, opr));
    }
    CHECK_OK(vf_engine_wait_all(e, nullptr));
    for (vf_var v : all)
        CHECK_OK(vf_var_destroy(e, v, nullptr, nullptr));
    CHECK_OK(vf_engine_destroy(e));
}

} // namespace

int main()
{
    zeroed_structs();
    const vf_engine_type types[] = {VF_ENGINE_NAIVE, VF_ENGINE_POOLED,
                                    VF_ENGINE_PERDEVICE};
    const char *names[] = {"naive", "pooled", "perdevice"};
    for (int i = 0; i < 3; i++) {
        context = names[i];
        vf_config cfg{};
        cfg.type = types[i];
        cfg.cpu_workers = 2;
        cfg.cpu_priority_workers = 1;
        seed_program(cfg);
    }
    std::printf("test_cxx_c_header: %s (%d failed checks)\n",
                failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
