# CTest script (cmake -P) for tools/varflow-report: TOOL is the program,
# WORK a scratch directory. A trace of three ops (1 -> 2, 1 -> 3, op 3 the
# longer) goes through every format; the outputs must hold what the trace
# says, the long option names work as the short ones, --help exits 0, and
# bad input must give exit status 1 (bad file) or 2 (bad usage).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/trace.json [=[
{"traceEvents":[
{"ph":"X","pid":1,"tid":1,"name":"load","ts":0.000,"dur":10.000,"args":{"id":1,"code":0,"push_us":0.000,"ready_us":0.000,"worker":0,"pool":0,"device":"cpu:0","property":"normal","async":false,"deps":[]}},
{"ph":"X","pid":1,"tid":1,"name":"small","ts":10.500,"dur":5.000,"args":{"id":2,"code":0,"push_us":0.100,"ready_us":10.200,"worker":0,"pool":0,"device":"cpu:0","property":"normal","async":false,"deps":[1]}},
{"ph":"X","pid":1,"tid":2,"name":"big","ts":10.700,"dur":40.000,"args":{"id":3,"code":0,"push_us":0.200,"ready_us":10.200,"worker":1,"pool":0,"device":"cpu:0","property":"normal","async":false,"deps":[1]}}
],"otherData":{"varflow":1,"engine":"pooled","workers":2,"worker_pools":["cpu","cpu"],"records":3,"dropped":0,"span_ns":50700}}
]=])

function(run_tool expect_rc)
  execute_process(COMMAND ${TOOL} ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "varflow-report ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

function(expect text what)
  string(FIND "${text}" "${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${what}' in:\n${text}")
  endif()
endfunction()

# Default: TRACE.html beside it, and the critical path on stdout.
run_tool(0 ${WORK}/trace.json -c)
expect("${out}" "critical path: 2 ops")
expect("${out}" "big")
file(READ ${WORK}/trace.html html)
expect("${html}" "<!DOCTYPE html>")
expect("${html}" "\"crit\":{\"length\":50000,\"elapsed\":50700,\"dag_work\":55000,\"ids\":[1,3]}")

run_tool(0 ${WORK}/trace.json -f dot -o -)
expect("${out}" "n1 -> n3 [color=")
expect("${out}" "n1 -> n2;")

run_tool(0 ${WORK}/trace.json -f summary -s count -o -)
expect("${out}" "sorted by count")
expect("${out}" "critical path 50.00 us over 2 ops")

run_tool(0 ${WORK}/trace.json -o ${WORK}/s.summary.json)
file(READ ${WORK}/s.summary.json sj)
expect("${sj}" "\"name\":\"big\",\"count\":1,\"skipped\":0,\"failed\":0,\"total_ns\":40000")

run_tool(0 ${WORK}/trace.json -f chrome -o ${WORK}/again.json)
run_tool(0 ${WORK}/again.json -f summary -o -)
expect("${out}" "3 ops recorded")

# An op pushed without a name: "op #<id>" in the trace (args "unnamed"),
# in the critical path and the dot file; one "(unnamed)" summary row.
file(WRITE ${WORK}/unnamed.json [=[
{"traceEvents":[
{"ph":"X","pid":1,"tid":1,"name":"op #1","ts":0.000,"dur":10.000,"args":{"id":1,"unnamed":true,"code":0,"push_us":0.000,"ready_us":0.000,"worker":0,"pool":0,"device":"cpu:0","property":"normal","async":false,"deps":[]}},
{"ph":"X","pid":1,"tid":1,"name":"op #2","ts":10.500,"dur":5.000,"args":{"id":2,"unnamed":true,"code":0,"push_us":0.100,"ready_us":10.200,"worker":0,"pool":0,"device":"cpu:0","property":"normal","async":false,"deps":[1]}}
],"otherData":{"varflow":1,"engine":"pooled","workers":1,"worker_pools":["cpu"],"records":2,"dropped":0,"span_ns":15500}}
]=])
run_tool(0 ${WORK}/unnamed.json -c -f dot -o -)
expect("${out}" "op #2                            worker 0")
expect("${out}" "n2 [label=\"op #2\\n")
run_tool(0 ${WORK}/unnamed.json -f summary -o -)
expect("${out}" "(unnamed)")
run_tool(0 ${WORK}/unnamed.json -f chrome -o -)
expect("${out}" "\"name\":\"op #1\"")
expect("${out}" "\"id\":1,\"unnamed\":true,")

# The long names, options after or before the trace, --name=value.
run_tool(0 --format=summary --sort count --output - ${WORK}/trace.json)
expect("${out}" "sorted by count")
run_tool(0 ${WORK}/trace.json --critical-path --format dot -o -)
expect("${out}" "critical path: 2 ops")
run_tool(0 --help)
expect("${out}" "usage: varflow-report")
run_tool(0 -h)

# The critical path in path order, which need not be id order (op 3
# before op 2: two threads pushing at once can do that); a name's control
# characters as U+FFFD, one op a line (a trace may come from elsewhere).
file(WRITE ${WORK}/backward.json [=[
{"traceEvents":[
{"ph":"X","pid":1,"tid":1,"name":"first","ts":0.000,"dur":100.000,"args":{"id":1,"code":0,"push_us":0.000,"ready_us":0.000,"worker":0,"pool":0,"device":"cpu:0","property":"normal","async":false,"deps":[]}},
{"ph":"X","pid":1,"tid":1,"name":"sec\nond\u001b[31m","ts":200.000,"dur":100.000,"args":{"id":2,"code":0,"push_us":0.100,"ready_us":200.000,"worker":0,"pool":0,"device":"cpu:0","property":"normal","async":false,"deps":[3]}},
{"ph":"X","pid":1,"tid":1,"name":"third","ts":100.000,"dur":100.000,"args":{"id":3,"code":0,"push_us":0.200,"ready_us":100.000,"worker":0,"pool":0,"device":"cpu:0","property":"normal","async":false,"deps":[1]}}
],"otherData":{"varflow":1,"engine":"pooled","workers":1,"worker_pools":["cpu"],"records":3,"dropped":0,"span_ns":300000}}
]=])
run_tool(0 ${WORK}/backward.json -c -f summary -o ${WORK}/backward.txt)
expect("${out}" "critical path: 3 ops")
string(FIND "${out}" "  #1 " at1)
string(FIND "${out}" "  #3 " at3)
string(FIND "${out}" "  #2 " at2)
if(at1 EQUAL -1 OR NOT at1 LESS at3 OR NOT at3 LESS at2)
  message(FATAL_ERROR "ops 1, 3, 2 in the path's order expected in:\n${out}")
endif()
expect("${out}" "sec�ond�[31m")
string(ASCII 27 esc)
string(FIND "${out}" "${esc}" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "an escape character went to the terminal:\n${out}")
endif()

# Standard output that cannot be written is an error (exit 1), as a file
# that cannot be is.
execute_process(COMMAND ${TOOL} ${WORK}/trace.json -c -f summary -o ${WORK}/s.txt
                RESULT_VARIABLE rc OUTPUT_FILE /dev/full ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "-c into a full device: exit ${rc}, expected 1\n${err}")
endif()
expect("${err}" "writing to standard output")

# With -f and no -o, the output is named by its format (never the trace).
run_tool(0 ${WORK}/trace.json -f summary)
file(READ ${WORK}/trace.txt txt)
expect("${txt}" "sorted by total")
run_tool(0 ${WORK}/trace.json -f chrome)
file(READ ${WORK}/trace.trace.json again)
expect("${again}" "\"traceEvents\"")
run_tool(0 ${WORK}/trace.json -f dot)
file(READ ${WORK}/trace.dot dot)
expect("${dot}" "n1 -> n2;")

# -s sorts a summary, also one the output's extension names; with any
# other format it is bad usage, not ignored. "-" reads the trace from
# standard input.
run_tool(0 ${WORK}/trace.json -s count -o ${WORK}/by_count.txt)
file(READ ${WORK}/by_count.txt txt)
expect("${txt}" "sorted by count")
run_tool(2 ${WORK}/trace.json -s count -f dot -o -)
# The refusal names the format given, not the output it goes to (a user
# tester's `-f dot -o /dev/null` was told /dev/null is no summary).
expect("${err}" "-f dot is not one")
run_tool(2 ${WORK}/trace.json -s count -o ${WORK}/x.html)
expect("${err}" "x.html is not one")
execute_process(COMMAND ${TOOL} - -f summary -o - RESULT_VARIABLE rc
                INPUT_FILE ${WORK}/trace.json OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a trace on standard input: exit ${rc}\n${err}")
endif()
expect("${out}" "3 ops recorded")

file(WRITE ${WORK}/bad.json "{\"traceEvents\":[]}")
run_tool(1 ${WORK}/bad.json -o -)
run_tool(1 ${WORK}/missing.json -o -)
run_tool(2)
run_tool(2 ${WORK}/trace.json -f nope)
run_tool(2 ${WORK}/trace.json -s nope)
run_tool(2 ${WORK}/trace.json --bogus)
run_tool(2 ${WORK}/trace.json -o)
run_tool(2 ${WORK}/trace.json ${WORK}/unnamed.json)
message(STATUS "varflow-report: ok")
