# Run by ctest (tests/engine/CMakeLists.txt): installs BUILD_DIR into WORK_DIR/prefix, builds
# SOURCE_DIR/examples against it with find_package(Fusor), runs embed_engine on MODEL, and checks
# the installed library's exported symbols. Any failing step stops with FATAL_ERROR naming it.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
step("configuring examples/ with find_package(Fusor)"
     ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK_DIR}/build -G Ninja
     -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix})
step("building examples/" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

file(GLOB lib ${prefix}/lib*/libfusor_engine.so)
if(NOT lib)
  message(FATAL_ERROR "no libfusor_engine.so under ${prefix}")
endif()
step("nm" nm -D -C --defined-only ${lib})
foreach(internal "fusor::Graph" "fusor::Executor" "google::protobuf" "fusor::v1::" "sqlite3_")
  string(FIND "${step_output}" "${internal}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "libfusor_engine.so exports internal symbols (${internal})")
  endif()
endforeach()
string(FIND "${step_output}" "fusor::Engine::Load" at)
if(at EQUAL -1)
  message(FATAL_ERROR "libfusor_engine.so does not export fusor::Engine::Load")
endif()

step("embed_engine" ${WORK_DIR}/build/embed_engine ${MODEL})
message("${step_output}")
file(REMOVE_RECURSE ${WORK_DIR})
