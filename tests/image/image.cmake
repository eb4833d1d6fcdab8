# Included by tests/CMakeLists.txt. include/hbg/hbg_image.h on its own:
# compiled as C11 (pedantic, freestanding, no libc headers), as C++17, and by nvcc for the
# device (compile only, no GPU needed) when nvcc is found.
set(HBG_IMAGE_SRC ${CMAKE_CURRENT_SOURCE_DIR}/image)
set(HBG_IMAGE_OUT ${CMAKE_CURRENT_BINARY_DIR}/image)
file(MAKE_DIRECTORY ${HBG_IMAGE_OUT})
# Without the C library's headers at all (only the compiler's own
# freestanding stddef.h / stdint.h): an #include of any libc header fails.
set(HBG_IMAGE_NOLIBC)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=include
                  OUTPUT_VARIABLE HBG_CC_INC OUTPUT_STRIP_TRAILING_WHITESPACE)
elseif(CMAKE_C_COMPILER_ID MATCHES "Clang")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-resource-dir
                  OUTPUT_VARIABLE HBG_CC_RES OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(HBG_CC_INC ${HBG_CC_RES}/include)
endif()
if(HBG_CC_INC AND EXISTS ${HBG_CC_INC}/stdint.h)
  set(HBG_IMAGE_NOLIBC -nostdinc -isystem ${HBG_CC_INC})
endif()
add_test(NAME image_header_c11
         COMMAND ${CMAKE_C_COMPILER} -std=c11 -Wall -Wextra -Werror -pedantic
                 -Wshadow -Wstrict-prototypes -ffreestanding ${HBG_IMAGE_NOLIBC}
                 -I${PROJECT_SOURCE_DIR}/include -c ${HBG_IMAGE_SRC}/image_alone.c
                 -o ${HBG_IMAGE_OUT}/image_alone_c11.o)
find_program(HBG_CXX NAMES c++ g++ clang++)
if(HBG_CXX)
  add_test(NAME image_header_cxx17
           COMMAND ${HBG_CXX} -std=c++17 -Wall -Wextra -Werror -pedantic
                   -Wshadow -I${PROJECT_SOURCE_DIR}/include -x c++
                   -c ${HBG_IMAGE_SRC}/image_alone.c
                   -o ${HBG_IMAGE_OUT}/image_alone_cxx17.o)
endif()
find_program(HBG_NVCC nvcc HINTS ${CUDAToolkit_BIN_DIR} /usr/local/cuda/bin)
if(HBG_NVCC)
  add_test(NAME image_header_nvcc
           COMMAND ${HBG_NVCC} -arch=sm_90 -std=c++17 -Werror all-warnings
                   -Xcompiler -Wall,-Wextra,-Werror
                   -I${PROJECT_SOURCE_DIR}/include
                   -c ${HBG_IMAGE_SRC}/image_kernel.cu
                   -o ${HBG_IMAGE_OUT}/image_kernel.o)
  set_tests_properties(image_header_nvcc PROPERTIES TIMEOUT 300)
endif()
