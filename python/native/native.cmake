# hbg._native, the Python package's C extension (stable ABI: one abi3 build
# for every CPython >= 3.8). Built when Python's headers are there (Debian:
# python3-dev), skipped with a note otherwise: the package then runs on
# ctypes. It takes libhbg's entry points with dlsym from the library the
# package loaded, so it links no libhbg. Not in sanitizer builds (the
# interpreter that would load it is not instrumented).
option(HBG_PYTHON_NATIVE "Build the Python extension hbg._native" ON)
if(HBG_PYTHON_NATIVE AND NOT HBG_SANITIZE AND NOT HBG_TSAN)
  # Debian's interpreter when there is one: python3-dev is its headers.
  if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 3.8 COMPONENTS Interpreter Development.Module)
  if(Python3_Development.Module_FOUND)
    # CMake 3.26's SABIModule does the same; 3.20 is this project's floor.
    add_library(hbg_pynative MODULE ${CMAKE_CURRENT_LIST_DIR}/hbg_native.c)
    target_include_directories(hbg_pynative PRIVATE
      ${PROJECT_SOURCE_DIR}/include ${Python3_INCLUDE_DIRS})
    target_compile_definitions(hbg_pynative PRIVATE Py_LIMITED_API=0x03080000)
    target_link_libraries(hbg_pynative PRIVATE ${CMAKE_DL_LIBS})
    set_target_properties(hbg_pynative PROPERTIES
      PREFIX "" OUTPUT_NAME "_native" SUFFIX ".abi3.so"
      C_VISIBILITY_PRESET hidden
      LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/python/hbg)
    if(HBG_INSTALL_PYTHON)
      install(TARGETS hbg_pynative LIBRARY DESTINATION ${HBG_PYTHON_DIR}/hbg)
    endif()
  else()
    message(STATUS "hbg: no Python headers (Debian: python3-dev): the "
                   "Python package is built without hbg._native (ctypes only)")
  endif()
endif()
