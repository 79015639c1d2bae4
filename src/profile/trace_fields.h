/*
 * trace_fields.h: the fields varflow puts in a Chrome trace, the one list
 * that the writer (trace_write.c, vf__prof_write_chrome) and the reader
 * (trace_load.c, vf_profile_load) both expand. Each side has a function
 * per kind below (put_<kind> and put_meta_<what> in trace_write.c,
 * get_<kind> and get_meta_<what> in trace_load.c), so a field added here
 * is written and read back, or the build fails.
 *
 * An op's record is a complete event ("X") at its start ("ts"), lasting
 * its run ("dur"), named after the op ("op #<id>" when it has no name).
 * Its "args" hold the rest of the vf_profile_record, one key per entry of
 * VF__TRACE_RECORD_ARGS, in that order: X(key, kind, member), `member`
 * being the record's field and `kind` how its value is written:
 *   op_id      a positive integer (an event without one is no record)
 *   unnamed    true, only for an op pushed without a name
 *   status     "ok", "skipped" or "failed": for people (code says it)
 *   integer    an integer
 *   micros     nanoseconds as microseconds with three decimals (exact)
 *   queued     start - ready, as micros: for people (both are there)
 *   device     "cpu:0", "cuda:1", "emulated:3"
 *   property   the property's name (vf__prof_property_name)
 *   boolean    true or false
 *   deps       an array of the ids of the ops that released it
 *   op_ref     an op's id, only when not 0 (a trace without it: 0)
 *   span       micros, only for an op with a device span
 * The reader takes the keys in any order, reads a key given twice twice
 * (the last counts), skips the fields for people, and ignores keys it does
 * not know (a later version's).
 */
#ifndef VF_PROFILE_TRACE_FIELDS_H
#define VF_PROFILE_TRACE_FIELDS_H

#define VF__TRACE_RECORD_ARGS(X)                                               \
    X("id", op_id, id)                                                         \
    X("unnamed", unnamed, name)                                                \
    X("status", status, status)                                                \
    X("code", integer, status)                                                 \
    X("push_us", micros, push_ns)                                              \
    X("ready_us", micros, ready_ns)                                            \
    X("queued_us", queued, start_ns)                                           \
    X("worker", integer, worker)                                               \
    X("pool", integer, pool)                                                   \
    X("device", device, device)                                                \
    X("property", property, property)                                          \
    X("async", boolean, async)                                                 \
    X("deps", deps, deps)                                                      \
    X("device_start_us", span, device_start_ns)                                \
    X("device_end_us", span, device_end_ns)                                    \
    X("inside_us", micros, inside_ns)                                          \
    X("parent", op_ref, parent)

/*
 * "otherData", the trace's last member: what the snapshot knows of the
 * engine, X(key, what), each `what` its own kind:
 *   format         "varflow": VF__TRACE_FORMAT, which the reader requires
 *   version        the library's version, "0.1.0": for people
 *   engine         the engine kind's name (vf_engine_type_name)
 *   workers        the number of workers
 *   worker_pools   an array: each worker's pool name
 *   records        the number of records: for people (the events say it)
 *   dropped        ops not recorded
 *   span_ns        the time the profile covers, in nanoseconds
 */
#define VF__TRACE_META(X)                                                      \
    X("varflow", format)                                                       \
    X("version", version)                                                      \
    X("engine", engine)                                                        \
    X("workers", workers)                                                      \
    X("worker_pools", worker_pools)                                            \
    X("records", records)                                                      \
    X("dropped", dropped)                                                      \
    X("span_ns", span_ns)

/* The format's version: a reader refuses any other. */
#define VF__TRACE_FORMAT 1

#endif /* VF_PROFILE_TRACE_FIELDS_H */
