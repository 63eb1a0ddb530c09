# Sourced by dev/device/build_pending.sh and dev/device/patch_ab.sh (never run alone): a scratch worktree of
# HEAD with the pending patches applied. `pending_tree NAME [PATCH.mbox...]` (patches default: every
# dev/pending/*.mbox), called from the repository's root, sets root, patches (an array), work (a temporary folder,
# removed with the worktree when the shell exits) and tree ($work/tree).
pending_tree() {
  local name=$1
  shift
  root=$PWD
  patches=("$@")
  if [ ${#patches[@]} -eq 0 ]; then
    shopt -s nullglob
    patches=(dev/pending/*.mbox)
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/rss-$name.XXXXXX")
  trap 'git -C "$root" worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  git worktree add --detach "$work/tree" HEAD >/dev/null
  local p
  for p in "${patches[@]}"; do
    echo "applying $p"
    git -C "$work/tree" -c user.name=rss -c user.email=rss@localhost am -3 -q "$root/$p"
  done
  tree=$work/tree
}
