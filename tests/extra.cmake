# Included by tests/CMakeLists.txt. The stand-in AscendCL runtime for the
# acl backend's tests: libascendcl.so (every symbol the backend resolves)
# and libascendcl_nosym.so (aclrtMemcpyAsync missing). Without the acl
# backend the tests still build and skip.
file(GLOB HBG_ACL_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_acl_*.c)
foreach(src ${HBG_ACL_TESTS})
  get_filename_component(name ${src} NAME_WE)
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/acl_stub)
  target_link_libraries(${name} PRIVATE ${CMAKE_DL_LIBS})
endforeach()

if(HBG_WITH_ACL)
  foreach(variant ascendcl ascendcl_nosym)
    add_library(${variant} SHARED ${CMAKE_CURRENT_SOURCE_DIR}/acl_stub/ascendcl_stub.c)
    target_include_directories(${variant} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${variant} PRIVATE Threads::Threads)
    set_target_properties(${variant} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/acl_stub)
  endforeach()
  target_compile_definitions(ascendcl_nosym PRIVATE HBGSTUB_OMIT_MEMCPY_ASYNC)

  foreach(src ${HBG_ACL_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_dependencies(${name} ascendcl ascendcl_nosym)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT
      "HBG_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/data;HBG_ACL_LIB=$<TARGET_FILE:ascendcl>;HBG_ACL_NOSYM_LIB=$<TARGET_FILE:ascendcl_nosym>")
  endforeach()
endif()
