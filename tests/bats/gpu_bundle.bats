#!/usr/bin/env bats
# scripts/build-gpu-bundle DIR replaces only a folder it wrote: one that holds its marker .gpu-bundle, the marker's
# checksum in SHA256SUMS, and nothing but the bundle's own files. Every other non-empty DIR is refused in one line
# (exit 2) before anything is built, and nothing in it is removed. Nothing here builds a bundle: a folder that
# passes goes on to the host checks, which a PATH without containerd stops (exit 1).

load common

BUILD_GPU_BUNDLE="${BUILD_GPU_BUNDLE:-$REPO/scripts/build-gpu-bundle}"
MARKER_TEXT="kubectl-tao GPU bundle 1: scripts/build-gpu-bundle replaces this folder only while this file, its line in SHA256SUMS and the bundle's own files are all it holds"

setup() {
  export HOME="$BATS_TEST_TMPDIR/home"
  mkdir -p "$HOME"
  # The tools the guard and the host checks use, and no containerd: a DIR that passes stops right after.
  TOOLS="$BATS_TEST_TMPDIR/tools"
  mkdir -p "$TOOLS"
  local t
  for t in bash env dirname ls head sha256sum grep cat; do ln -s "$(command -v "$t")" "$TOOLS/$t"; done
}

build() { # DIR: the script with PATH=$TOOLS; stdout and stderr apart
  run --separate-stderr env PATH="$TOOLS" "$BUILD_GPU_BUNDLE" "$1"
}

listing() { # DIR: every entry below it with its checksum, to compare before and after
  (cd "$1" && find . -print0 | sort -z | xargs -0 -I{} sh -c 'if [ -f "{}" ]; then sha256sum "{}"; else echo "{}"; fi')
}

earlier_bundle() { # DIR: a folder as build-gpu-bundle writes it (stand-in contents)
  mkdir -p "$1"
  echo stand-in >"$1/payload.tar.xz"
  cp "$REPO/scripts/gpu-smoke" "$1/gpu-smoke"
  echo readme >"$1/README.txt"
  printf '%s\n' "$MARKER_TEXT" >"$1/.gpu-bundle"
  (cd "$1" && sha256sum .gpu-bundle payload.tar.xz gpu-smoke README.txt >SHA256SUMS)
}

refused() { # DIR EXPECTED-STDERR: exit 2, that one line, nothing built, nothing in DIR changed
  local before
  before=$(listing "$1")
  build "$1"
  assert_failure 2
  assert_equal "$stderr" "$2"
  assert_output ""
  assert_equal "$(listing "$1")" "$before"
}

@test "the repository's own scripts/ folder is refused and left whole" {
  refused "$REPO/scripts" "build-gpu-bundle: $REPO/scripts is not empty and holds no bundle marker (.gpu-bundle): not a bundle this script wrote, so nothing in it is removed; name an empty or new directory"
}

@test "a Downloads folder holding a copy of gpu-smoke is refused and left whole" {
  local downloads=$HOME/Downloads
  mkdir -p "$downloads"
  cp "$REPO/scripts/gpu-smoke" "$downloads/gpu-smoke"
  echo 'tax return' >"$downloads/2025.pdf"
  refused "$downloads" "build-gpu-bundle: $downloads is not empty and holds no bundle marker (.gpu-bundle): not a bundle this script wrote, so nothing in it is removed; name an empty or new directory"
  # gpu-smoke and a SHA256SUMS alone (what the old guard took for a bundle) are not a marker either
  rm "$downloads/2025.pdf"
  (cd "$downloads" && sha256sum gpu-smoke >SHA256SUMS)
  refused "$downloads" "build-gpu-bundle: $downloads is not empty and holds no bundle marker (.gpu-bundle): not a bundle this script wrote, so nothing in it is removed; name an empty or new directory"
}

@test "an earlier bundle with anything else in it is refused, naming what" {
  local dir=$BATS_TEST_TMPDIR/bundle
  earlier_bundle "$dir"
  echo notes >"$dir/my notes.txt"
  refused "$dir" "build-gpu-bundle: $dir holds my\\ notes.txt, which is not a file a bundle build writes: nothing in $dir is removed; move it away or name an empty or new directory"
  rm "$dir/my notes.txt"
  mkdir "$dir/.cache"
  refused "$dir" "build-gpu-bundle: $dir holds .cache, which is not a file a bundle build writes: nothing in $dir is removed; move it away or name an empty or new directory"
  rmdir "$dir/.cache"
  # a bundle's name that is not a plain file: a folder, or a link out of the bundle
  rm "$dir/README.txt"
  mkdir "$dir/README.txt"
  echo keep >"$dir/README.txt/inside"
  refused "$dir" "build-gpu-bundle: $dir holds README.txt, which is not a file a bundle build writes: nothing in $dir is removed; move it away or name an empty or new directory"
  rm -r "$dir/README.txt"
  ln -s "$HOME" "$dir/README.txt"
  refused "$dir" "build-gpu-bundle: $dir holds README.txt, which is not a file a bundle build writes: nothing in $dir is removed; move it away or name an empty or new directory"
}

@test "a marker that is not this script's, or does not match its checksum, is refused" {
  local dir=$BATS_TEST_TMPDIR/bundle
  earlier_bundle "$dir"
  echo "my own marker" >"$dir/.gpu-bundle"
  refused "$dir" "build-gpu-bundle: $dir/.gpu-bundle is not the marker this script writes: nothing in $dir is removed; name an empty or new directory"
  printf '%s\n' "$MARKER_TEXT" >"$dir/.gpu-bundle"
  grep -v ' \.gpu-bundle$' "$dir/SHA256SUMS" >"$dir/sums" && mv "$dir/sums" "$dir/SHA256SUMS"
  refused "$dir" "build-gpu-bundle: $dir/.gpu-bundle does not match its checksum in $dir/SHA256SUMS: nothing in $dir is removed; name an empty or new directory"
  rm "$dir/SHA256SUMS"
  refused "$dir" "build-gpu-bundle: $dir/.gpu-bundle does not match its checksum in $dir/SHA256SUMS: nothing in $dir is removed; name an empty or new directory"
  # the marker as a link to the real one elsewhere
  earlier_bundle "$BATS_TEST_TMPDIR/real"
  rm "$dir/.gpu-bundle"
  ln -s "$BATS_TEST_TMPDIR/real/.gpu-bundle" "$dir/.gpu-bundle"
  cp "$BATS_TEST_TMPDIR/real/SHA256SUMS" "$dir/SHA256SUMS"
  refused "$dir" "build-gpu-bundle: $dir is not empty and holds no bundle marker (.gpu-bundle): not a bundle this script wrote, so nothing in it is removed; name an empty or new directory"
}

@test "a link to a folder, or a file, as DIR is refused" {
  earlier_bundle "$BATS_TEST_TMPDIR/real"
  ln -s "$BATS_TEST_TMPDIR/real" "$BATS_TEST_TMPDIR/link"
  local before
  before=$(listing "$BATS_TEST_TMPDIR/real")
  build "$BATS_TEST_TMPDIR/link"
  assert_failure 2
  assert_equal "$stderr" "build-gpu-bundle: $BATS_TEST_TMPDIR/link is a symbolic link: name the directory itself, or an empty or new one"
  assert_equal "$(listing "$BATS_TEST_TMPDIR/real")" "$before"
  echo data >"$BATS_TEST_TMPDIR/file"
  build "$BATS_TEST_TMPDIR/file"
  assert_failure 2
  assert_equal "$stderr" "build-gpu-bundle: $BATS_TEST_TMPDIR/file exists and is not a directory: name an empty or new directory"
  assert_equal "$(cat "$BATS_TEST_TMPDIR/file")" data
}

@test "an earlier bundle, an empty folder and a new one pass the guard (then the host checks run)" {
  local dir=$BATS_TEST_TMPDIR/bundle before
  earlier_bundle "$dir"
  before=$(listing "$dir")
  for target in "$dir" "$BATS_TEST_TMPDIR/empty" "$BATS_TEST_TMPDIR/new/gpu-bundle"; do
    [ "$target" != "$BATS_TEST_TMPDIR/empty" ] || mkdir "$target"
    build "$target"
    assert_failure 1
    assert_equal "$stderr" "build-gpu-bundle: needs 'containerd' on this machine (scripts/install-cluster-deps; xz-utils)"
  done
  assert_equal "$(listing "$dir")" "$before"
  [ ! -e "$BATS_TEST_TMPDIR/new" ]
}
