# Turns a binary file into a C array: cmake -DIN=file -DOUT=file.h
# -DNAME=symbol -P embed.cmake.  The array is 16-byte aligned, as the CUDA
# driver expects of a module image in memory.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REPEAT "0x..," 16 row)
string(REGEX REPLACE "(${row})" "\\1\n" body "${body}")
file(WRITE "${OUT}.tmp"
     "/* Generated from ${IN} by cmake/embed.cmake; do not edit. */\n"
     "_Alignas(16) static const unsigned char ${NAME}[${bytes}] = {\n"
     "${body}\n};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
