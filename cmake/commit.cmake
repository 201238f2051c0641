# Writes OUT: a header defining IPCP_BENCH_COMMIT as the source tree's
# commit (with "-dirty" when tracked files differ from it), or "unknown"
# outside a git checkout.  Run at every build (the bench's figures name the
# commit that made them); the file is rewritten only when its text changes,
# so that nothing rebuilds for nothing.
set(commit "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SRC}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SRC}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE rc ERROR_QUIET)
  if(rc EQUAL 0 AND head)
    set(commit "${head}")
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SRC}" diff --quiet HEAD --
                    RESULT_VARIABLE dirty ERROR_QUIET)
    if(NOT dirty EQUAL 0)
      set(commit "${commit}-dirty")
    endif()
  endif()
endif()
set(text "#define IPCP_BENCH_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
