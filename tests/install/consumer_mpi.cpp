/*
 * consumer_mpi.cpp: a C++ program of varflow.hpp and libvarflow-mpi, built
 * by scripts/check-install against the installed packages (varflow::cxx
 * with varflow::mpi, and pkg-config's varflow-mpi) and run on 2 ranks. It
 * checks that varflow_mpi.h needs no MPI C++ library (Open MPI's <mpi.h>
 * pulls in its C++ bindings in C++ unless told not to, and neither package
 * links them) and that varflow::cxx over varflow::mpi loads one
 * libvarflow, the shared one. Rank 0 owns x = 21; one op on rank 1 (the
 * owner of y) writes y = 2 x; every rank gets y and checks it (42).
 */
#include <cstdio>

#include <varflow.hpp>
#include <varflow_mpi.h>

namespace
{
struct pair_vars {
    vf_var x, y;
};

int twice(vf_run *run, void *arg)
{
    auto *v = static_cast<pair_vars *>(arg);
    vf_engine *e = vf_run_engine(run);
    *static_cast<double *>(vf_mpi_data(
        e, v->y)) = 2 * *static_cast<const double *>(vf_mpi_data(e, v->x));
    return 0;
}
} // namespace

int main()
{
    varflow::engine eng;
    if (vf_mpi_create(eng.get(), MPI_COMM_WORLD) != 0) {
        std::fprintf(stderr, "vf_mpi_create: %s\n", vf_error_detail());
        return 1;
    }
    int rank = vf_mpi_rank(eng.get()), size = vf_mpi_size(eng.get());
    int owner_y = 1 % size;
    double x = 21, y = 0;
    pair_vars v{};
    int rc = vf_mpi_var_create(eng.get(), &v.x, rank == 0 ? &x : nullptr,
                               sizeof x, 0);
    if (rc == 0)
        rc = vf_mpi_var_create(eng.get(), &v.y, rank == owner_y ? &y : nullptr,
                               sizeof y, owner_y);
    vf_op op{};
    op.fn = twice;
    op.arg = &v;
    op.reads = {&v.x, 1};
    op.writes = {&v.y, 1};
    if (rc == 0)
        rc = vf_mpi_push(eng.get(), &op, VF_MPI_OWNER);
    if (rc == 0)
        rc = vf_mpi_wait_all(eng.get(), nullptr);
    if (rc == 0)
        rc = vf_mpi_get(eng.get(), v.y, VF_MPI_ALL, nullptr);
    const double *y_here = rc == 0 ? static_cast<const double *>(
                                         vf_mpi_data(eng.get(), v.y))
                                   : nullptr;
    double got = y_here != nullptr ? *y_here : 0;
    if (rc != 0)
        std::fprintf(stderr, "rank %d: %s\n", rank, vf_error_detail());
    int drc = vf_mpi_destroy(eng.get(), nullptr);
    if (rc != 0 || drc != 0 || got != 42) {
        std::fprintf(stderr, "rank %d: y = %g (42 expected), rc %d, %d\n", rank,
                     got, rc, drc);
        return 1;
    }
    std::printf("rank %d of %d: y = %g\n", rank, size, got);
    return 0;
}
