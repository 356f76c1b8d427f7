# Run by ctest (tests/engine/CMakeLists.txt): installs BUILD_DIR's engine component into
# WORK_DIR/prefix, checks what it holds (the stripped library, fusor/ headers only, no programs),
# builds SOURCE_DIR/examples against it with find_package(Fusor), runs embed_engine and
# serve_engine on MODEL, and checks that the library exports the C API and nothing else. Any failing step stops with FATAL_ERROR naming it.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("cmake --install --component engine"
     ${CMAKE_COMMAND} --install ${BUILD_DIR} --component engine --prefix ${prefix})
file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
foreach(path ${installed})
  if(NOT path MATCHES "^(include/fusor/(fusor_c_api|fusor_cxx_api)\\.h|lib[^/]*/(libfusor_engine\\.so.*|cmake/Fusor/.*))$")
    message(FATAL_ERROR "the engine component installs ${path}; it holds the library, "
                        "include/fusor/fusor_c_api.h, fusor_cxx_api.h and the CMake package only")
  endif()
endforeach()
step("configuring examples/ with find_package(Fusor)"
     ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK_DIR}/build -G Ninja
     -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix})
step("building examples/" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

file(GLOB lib ${prefix}/lib*/libfusor_engine.so)
if(NOT lib)
  message(FATAL_ERROR "no libfusor_engine.so under ${prefix}")
endif()
step("readelf" readelf -S ${lib})
if(step_output MATCHES "\\.debug_info|\\.symtab")
  message(FATAL_ERROR "the installed libfusor_engine.so is not stripped")
endif()
step("nm" nm -D -C --defined-only ${lib})
foreach(internal "fusor::" "google::protobuf" "sqlite3_")
  string(FIND "${step_output}" "${internal}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "libfusor_engine.so exports internal symbols (${internal})")
  endif()
endforeach()
string(FIND "${step_output}" "fusor_engine_load" at)
if(at EQUAL -1)
  message(FATAL_ERROR "libfusor_engine.so does not export fusor_engine_load")
endif()

step("embed_engine" ${WORK_DIR}/build/embed_engine ${MODEL})
message("${step_output}")
step("serve_engine" ${WORK_DIR}/build/serve_engine ${MODEL} 4 8)
message("${step_output}")
file(REMOVE_RECURSE ${WORK_DIR})
