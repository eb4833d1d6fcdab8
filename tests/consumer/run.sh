#!/usr/bin/env bash
# Install the build into a temporary prefix, then compile a consumer against
# the installed headers and link it: as C and as C++, with the shared and
# the static library, through pkg-config and through find_package.
set -eu
build=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "consumer: $*" >&2; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc="$tmp/prefix/lib/pkgconfig"
[ -d "$pc" ] || pc=$(dirname "$(find "$tmp/prefix" -name hbg.pc | head -1)")
export PKG_CONFIG_PATH="$pc"
libdir=$(pkg-config --variable=libdir hbg)
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags hbg) "$src/consumer.c" \
  -o "$tmp/consumer_c" $(pkg-config --libs hbg)
c++ -std=c++11 -Wall -Wextra -Werror $(pkg-config --cflags hbg) -x c++ \
  "$src/consumer.c" -o "$tmp/consumer_cxx" $(pkg-config --libs hbg)
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_c" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_cxx" >/dev/null

# pkg-config --static: a copy of the prefix without the shared library, so
# that -lhbg can only be the archive and the link needs exactly the
# libraries pkg-config lists.
cp -a "$tmp/prefix" "$tmp/static"
rm -f "$tmp/static"/lib*/libhbg.so* "$tmp/static"/lib/*/libhbg.so*
spc=$(dirname "$(find "$tmp/static" -name hbg.pc | head -1)")
slibs=$(PKG_CONFIG_PATH="$spc" pkg-config --static --libs hbg)
scflags=$(PKG_CONFIG_PATH="$spc" pkg-config --cflags hbg)
cc -std=c11 -Wall -Wextra -Werror $scflags \
  "$src/consumer.c" -o "$tmp/static_c" $slibs
c++ -std=c++11 -Wall -Wextra -Werror $scflags -x c++ \
  "$src/consumer.c" -o "$tmp/static_cxx" $slibs
for exe in "$tmp/static_c" "$tmp/static_cxx"; do
  "$exe" >/dev/null || fail "$exe failed"
  ! ldd "$exe" | grep -q 'libhbg\.so' || fail "$exe links the shared libhbg"
done

# find_package: hbg::hbg and hbg::hbg_static, as C and as C++.
cmake -S "$src" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm" >/dev/null
for exe in consumer consumer_cxx; do
  LD_LIBRARY_PATH="$libdir" "$tmp/cm/$exe" >/dev/null || fail "$exe failed"
done
for exe in consumer_static consumer_cxx_static; do
  "$tmp/cm/$exe" >/dev/null || fail "$exe failed"
  ! ldd "$tmp/cm/$exe" | grep -q 'libhbg\.so' || fail "$exe links the shared libhbg"
done
echo "consumer: ok"
