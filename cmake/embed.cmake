# cmake -DIN=FILE -DOUT=FILE.c -DNAME=symbol -P embed.cmake
# Writes FILE's bytes as a C array `const unsigned char NAME[]` (64-byte
# aligned) plus `const size_t NAME_size`.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR bytes "${digits} / 2")
if(bytes EQUAL 0)
  message(FATAL_ERROR "embed.cmake: ${IN} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],)"
       "\\1\n  " body "${body}")
get_filename_component(src "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "/* Generated at build time by cmake/embed.cmake from ${src}: do not edit. */\n"
  "#include <stddef.h>\n\n"
  "extern const unsigned char ${NAME}[${bytes}];\n"
  "extern const size_t ${NAME}_size;\n\n"
  "__attribute__((aligned(64))) const unsigned char ${NAME}[${bytes}] = {\n"
  "  ${body}\n};\n"
  "const size_t ${NAME}_size = ${bytes};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
