# Turns Catch2 tags into CTest labels, run after each build of a test executable (see
# shardify_discover_tests in tests/CMakeLists.txt). A test tagged [subprocess],
# [distributed] or [slow] gets the label of that name; a test without [subprocess] gets
# `unit`. Writes set_tests_properties() calls for every test of EXECUTABLE to OUTPUT.
# Catch2 v2 lists no tags per test in a form a script can read, so each tag is asked for
# by its own test spec.
cmake_minimum_required(VERSION 3.25)  # as the project: a script run with -P sets its own policies

function(list_tests spec out)
  execute_process(COMMAND "${EXECUTABLE}" ${spec} --list-test-names-only OUTPUT_VARIABLE names
                  RESULT_VARIABLE rc)
  if(rc LESS 0)  # Catch2 v2 exits with the number of tests listed
    message(FATAL_ERROR "listing the tests of ${EXECUTABLE} failed: ${rc}")
  endif()
  string(REGEX REPLACE "\n$" "" names "${names}")
  string(REPLACE "\n" ";" names "${names}")
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

list_tests("" all)
set(tags subprocess distributed slow)
foreach(tag ${tags})
  list_tests("[${tag}]" tagged_${tag})
endforeach()

set(script "")
foreach(name ${all})
  set(labels "")
  foreach(tag ${tags})
    list(FIND tagged_${tag} "${name}" at)
    if(at GREATER -1)
      list(APPEND labels ${tag})
    endif()
  endforeach()
  if(NOT "subprocess" IN_LIST labels)
    list(PREPEND labels unit)
  endif()
  # A test that prints SHARDIFY_SKIP's line (tests/common/skip.h) is reported as skipped.
  string(APPEND script "set_tests_properties([==[${name}]==] PROPERTIES LABELS \"${labels}\" "
                       "SKIP_REGULAR_EXPRESSION \"\\\\[shardify test skipped\\\\]\")\n")
endforeach()
file(WRITE "${OUTPUT}" "${script}")
