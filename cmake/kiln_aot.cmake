# kiln_add_aot(TARGET GRAPH <file.kiln> [NAME <name>] [ARGS <kiln aot options>...])
# Runs `kiln aot` on GRAPH at build time and adds the generated NAME.cpp
# (and NAME.h's folder) to TARGET, which then links kiln_runtime only: the
# kernel's cubin, signature and launch rule are data in the source. TARGET
# may be a shared library: it then exports each graph's C interface
# (kiln_NAME, kiln/runtime/c_api.h) for other languages' FFIs, which
# python/kiln_torch.py calls from PyTorch.
function(kiln_add_aot target)
  cmake_parse_arguments(A "" "GRAPH;NAME" "ARGS" ${ARGN})
  if(NOT A_GRAPH)
    message(FATAL_ERROR "kiln_add_aot(${target}): GRAPH is required")
  endif()
  if(NOT A_NAME)
    get_filename_component(A_NAME ${A_GRAPH} NAME_WE)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/kiln_aot/${target})  # per target: names may repeat across targets
  add_custom_command(
    OUTPUT ${dir}/${A_NAME}.h ${dir}/${A_NAME}.cpp
    COMMAND ${CMAKE_COMMAND} -E env KILN_CACHE=0 $<TARGET_FILE:kiln> aot ${A_GRAPH} --name ${A_NAME} ${A_ARGS} -o ${dir}
    DEPENDS kiln ${A_GRAPH}
    COMMENT "kiln aot ${A_NAME}"
    VERBATIM)
  target_sources(${target} PRIVATE ${dir}/${A_NAME}.cpp)
  target_include_directories(${target} PRIVATE ${dir})
  target_link_libraries(${target} PRIVATE kiln_runtime)
endfunction()
