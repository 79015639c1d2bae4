# migrate-0.1-names.sed: the public API renames since varflow 0.1.0
# (CHANGELOG.md, "One naming rule for the API"). Usage:
#   sed -E -i -f scripts/migrate-0.1-names.sed FILES
# Word-bounded (GNU sed \b); longer names first, so vf_wait_all_timed is
# not taken for vf_wait_all. Review the diff: a name inside a string or a
# comment is rewritten too.
s/\bvf_profile_write_summary\b/vf_profile_summary_write/g
s/\bvf_profile_summary_free\b/vf_profile_summary_destroy/g
s/\bvf_profile_engine_kind\b/vf_profile_engine_type/g
s/\bvf_last_error_detail\b/vf_error_detail/g
s/\bvf_profile_path_free\b/vf_profile_path_destroy/g
s/\bvf_debug_alloc_count\b/vf__testing_alloc_count/g
s/\bvf_set_error_detail\b/vf_error_set_detail/g
s/\bvf_debug_fail_alloc\b/vf__testing_fail_alloc/g
s/\bvf_complete_failed\b/vf_completion_fail/g
s/\bvf_operator_delete\b/vf_operator_destroy/g
s/\bvf_wait_var_timed\b/vf_var_wait_timed/g
s/\bvf_wait_all_timed\b/vf_engine_wait_all_timed/g
s/\bvf_mpi_var_delete\b/vf_mpi_var_destroy/g
s/\bvf_set_bulk_size\b/vf_bulk_set_size/g
s/\bvf_mpi_stats_get\b/vf_mpi_stats_local/g
s/\bvf_operator_new\b/vf_operator_create/g
s/\bvf_profile_free\b/vf_profile_destroy/g
s/\bvf_mpi_finalize\b/vf_mpi_destroy/g
s/\bvf_mpi_vars_new\b/vf_mpi_vars_create/g
s/\bvf_engine_kind\b/vf_engine_type_of/g
s/\bvf_mpi_var_new\b/vf_mpi_var_create/g
s/\bvf_var_delete\b/vf_var_destroy/g
s/\bvf_strerror\b/vf_error_string/g
s/\bvf_err_name\b/vf_error_name/g
s/\bvf_complete\b/vf_completion_finish/g
s/\bvf_wait_var\b/vf_var_wait/g
s/\bvf_wait_all\b/vf_engine_wait_all/g
s/\bvf_mpi_init\b/vf_mpi_create/g
s/\bvf_var_new\b/vf_var_create/g
s/\bvf_push\b/vf_engine_push/g
