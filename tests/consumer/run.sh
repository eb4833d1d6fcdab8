#!/usr/bin/env bash
# Install the build into a temporary prefix, then compile a consumer against
# the installed headers: as C, as C++, through pkg-config and find_package.
set -eu
build=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc="$tmp/prefix/lib/pkgconfig"
[ -d "$pc" ] || pc=$(dirname "$(find "$tmp/prefix" -name hbg.pc | head -1)")
export PKG_CONFIG_PATH="$pc"
libdir=$(pkg-config --variable=libdir hbg)
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags hbg) "$src/consumer.c" \
  -o "$tmp/consumer_c" $(pkg-config --libs hbg)
c++ -std=c++11 -Wall -Wextra -Werror $(pkg-config --cflags hbg) -x c++ \
  "$src/consumer.c" -o "$tmp/consumer_cxx" $(pkg-config --libs hbg)
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_c"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_cxx"
cmake -S "$src" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/cm/consumer"
echo "consumer: ok"
