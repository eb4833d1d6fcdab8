# Included by tests/CMakeLists.txt. src/kernels/kern_src.h, the built-in
# kernels' single source, and src/exec/sched_src.h, the scheduling core, on
# their own: as C11 (pedantic, freestanding, no libc
# headers), as C++17, and by nvcc as device code for sm_90 with the kernels'
# IEEE flags (compile only, no GPU needed) when nvcc is found.
set(HBG_KERN_SRC ${CMAKE_CURRENT_SOURCE_DIR}/kern)
set(HBG_KERN_OUT ${CMAKE_CURRENT_BINARY_DIR}/kern)
file(MAKE_DIRECTORY ${HBG_KERN_OUT})
set(HBG_KERN_INC -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src)
# HBG_IMAGE_NOLIBC, HBG_CXX and HBG_NVCC come from image/image.cmake.
add_test(NAME kern_src_c11
         COMMAND ${CMAKE_C_COMPILER} -std=c11 -Wall -Wextra -Werror -pedantic
                 -Wshadow -Wstrict-prototypes -ffreestanding ${HBG_IMAGE_NOLIBC}
                 ${HBG_KERNEL_C_FLAGS} ${HBG_KERN_INC}
                 -c ${HBG_KERN_SRC}/kern_alone.c -o ${HBG_KERN_OUT}/kern_alone_c11.o)
if(HBG_CXX)
  add_test(NAME kern_src_cxx17
           COMMAND ${HBG_CXX} -std=c++17 -Wall -Wextra -Werror -pedantic -Wshadow
                   ${HBG_KERNEL_C_FLAGS} ${HBG_KERN_INC} -x c++
                   -c ${HBG_KERN_SRC}/kern_alone.c
                   -o ${HBG_KERN_OUT}/kern_alone_cxx17.o)
endif()
if(HBG_NVCC)
  add_test(NAME kern_src_nvcc
           COMMAND ${HBG_NVCC} -arch=sm_90 -std=c++17 -Werror all-warnings
                   ${HBG_KERNEL_NVCC_FLAGS} -Xcompiler -Wall,-Wextra,-Werror
                   ${HBG_KERN_INC} -c ${HBG_KERN_SRC}/kern_kernel.cu
                   -o ${HBG_KERN_OUT}/kern_kernel.o)
  set_tests_properties(kern_src_nvcc PROPERTIES TIMEOUT 300)
endif()
# The same kernels run on a GPU against the CPU, bit for bit (kern_gpu.cu):
# built here whenever nvcc is found, skipped (77) where no GPU is present.
if(HBG_NVCC AND NOT HBG_SANITIZE AND NOT HBG_TSAN)
  add_custom_command(
    OUTPUT ${HBG_KERN_OUT}/kern_gpu
    COMMAND ${HBG_NVCC} -arch=sm_90 -std=c++17 -Werror all-warnings
            ${HBG_KERNEL_NVCC_FLAGS} -Xcompiler -Wall,-Wextra,-Werror
            -Xcompiler ${HBG_KERNEL_C_FLAGS} ${HBG_KERN_INC}
            ${HBG_KERN_SRC}/kern_gpu.cu -o ${HBG_KERN_OUT}/kern_gpu
    DEPENDS ${HBG_KERN_SRC}/kern_gpu.cu
            ${PROJECT_SOURCE_DIR}/src/kernels/kern_src.h
            ${PROJECT_SOURCE_DIR}/include/hbg/hbg_image.h
    COMMENT "nvcc kern_gpu")
  add_custom_target(kern_gpu_bin ALL DEPENDS ${HBG_KERN_OUT}/kern_gpu)
  add_test(NAME kern_gpu COMMAND ${HBG_KERN_OUT}/kern_gpu)
  set_tests_properties(kern_gpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
