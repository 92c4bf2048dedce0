#!/usr/bin/env bash
# Fetch the full public traces whose first rows simkv bundles under traces/ (see
# traces/README.md for their licences and attribution) into reports/traces/ (git-ignored):
#
#   tools/fetch_traces.sh            # all of them
#   tools/fetch_traces.sh mooncake   # Mooncake FAST'25: conversation, tool-agent (Apache-2.0)
#   tools/fetch_traces.sh bailian    # Qwen-Bailian usage traces: to-C (traceA), to-B
#                                    # (traceB), coder, thinking (Apache-2.0)
#
# Then, e.g.: simkv cache-curve reports/traces/toolagent_trace.jsonl --model llama-3-8b
# Files kept in Git LFS come from $MEDIA_BASE when $RAW_BASE answers with an LFS pointer.
# Every file is checked before it is kept: its first line must be a JSON object with
# "hash_ids" and "input_length" (an HTML error page or a truncated download is refused, exit 1,
# and nothing is left under its name). OUT, RAW_BASE and MEDIA_BASE may be set in the
# environment (tests/test_fetch_traces.py serves the files from a local folder through file://).
set -euo pipefail

OUT="${OUT:-reports/traces}"
RAW_BASE="${RAW_BASE:-https://raw.githubusercontent.com}"
MEDIA_BASE="${MEDIA_BASE:-https://media.githubusercontent.com/media}"
MOONCAKE="kvcache-ai/Mooncake/main/FAST25-release/traces"
BAILIAN="alibaba-edu/qwen-bailian-usagetraces-anon/main"

fetch() {  # fetch OWNER/REPO/REF/PATH: into $OUT/<file name>, resolving LFS pointers
    local src="$1" dest="$OUT/${1##*/}" part="$OUT/${1##*/}.part"
    curl -fsSL --retry 3 -o "$part" "$RAW_BASE/$src"
    if head -c 40 "$part" | grep -q '^version https://git-lfs'; then
        curl -fsSL --retry 3 -o "$part" "$MEDIA_BASE/$src"
    fi
    if ! head -n 1 "$part" | grep -q '"hash_ids"' \
        || ! head -n 1 "$part" | grep -q '"input_length"'; then
        rm -f "$part"
        echo "$src: not a trace with hash_ids and input_length (first line checked)" >&2
        exit 1
    fi
    mv "$part" "$dest"
    echo "wrote $dest ($(wc -l < "$dest") lines)"
}

case "${1:-all}" in
    all|mooncake|bailian) ;;
    *) echo "usage: $0 [all|mooncake|bailian]" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
if [[ "${1:-all}" != bailian ]]; then
    fetch "$MOONCAKE/conversation_trace.jsonl"
    fetch "$MOONCAKE/toolagent_trace.jsonl"
fi
if [[ "${1:-all}" != mooncake ]]; then
    for name in traceA traceB coder thinking; do
        fetch "$BAILIAN/qwen_${name}_blksz_16.jsonl"
    done
fi
