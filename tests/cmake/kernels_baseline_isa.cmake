# No ISA code at dlopen: in the avx2 and avx512 kernel plugins, the translation units the
# host runs before it knows the CPU (descriptor + score + factory: plugin.cpp, CPUID/XCR0:
# cpu_support.cpp) must contain no instruction that touches a ymm/zmm or mask register and
# no VEX/EVEX-encoded (v-prefixed) instruction on xmm registers.
# Only the *_kernels.cpp objects may. Checked on the object files with objdump.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND TARGET k3_kernels_avx2 AND TARGET k3_kernels_avx512)
    add_test(NAME "kernels_simd: avx2/avx512 descriptor and score objects use baseline x86-64 only"
             COMMAND ${CMAKE_COMMAND} -DOBJ_ROOT=${PROJECT_BINARY_DIR}/plugins/kernels -P ${CMAKE_CURRENT_LIST_FILE})
  endif()
  return()
endif()

find_program(OBJDUMP objdump)
if(NOT OBJDUMP)
  message(FATAL_ERROR "objdump (binutils) is needed to inspect the plugin objects")
endif()
set(checked 0)
foreach(set avx2 avx512)
  foreach(tu plugin cpu_support)
    file(GLOB_RECURSE objs ${OBJ_ROOT}/${set}/*${tu}.cpp.o)
    if(NOT objs)
      message(FATAL_ERROR "no object for ${set}/${tu}.cpp under ${OBJ_ROOT}: build the ${set} plugin first")
    endif()
    foreach(obj IN LISTS objs)
      execute_process(COMMAND ${OBJDUMP} -d --no-show-raw-insn ${obj} OUTPUT_VARIABLE asm RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "objdump failed on ${obj}")
      endif()
      string(REGEX MATCH "[^\n]*(%(ymm|zmm|k[1-7])|\tv[a-z0-9]+[ \t][^\n]*%xmm)[^\n]*" hit "${asm}")
      if(hit)
        message(FATAL_ERROR "${obj}: non-baseline instruction in a TU that runs before the CPU check: ${hit}")
      endif()
      math(EXPR checked "${checked} + 1")
    endforeach()
  endforeach()
endforeach()
message(STATUS "${checked} baseline objects checked")
