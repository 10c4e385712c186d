#!/usr/bin/env bash
# Build the seed corpora from the upstream conformance fixtures and the
# bundled incident sample: one line per file for parse_line, whole files
# (and a few joined pairs) for parse_chunk, handoff tokens and their decoded
# claims for token_decode. fuzz/corpus is git-ignored.
set -euo pipefail
cd "$(dirname "$0")"
root=..
logs=$(ls "$root"/tests/fixtures/upstream/*/fixtures/*.ndjson "$root"/samples/incident/*.ndjson)
mkdir -p corpus/parse_line corpus/parse_chunk corpus/token_decode
put() { # put DIR < data: store under the content's hash
    local tmp; tmp=$(mktemp)
    cat > "$tmp"
    mv "$tmp" "$1/$(sha1sum < "$tmp" | cut -c1-16)"
}
for f in $logs; do
    put corpus/parse_chunk < "$f"
    # parse_line: each distinct line (the samples are large: every 7th)
    case "$f" in
        */samples/*) step=7 ;;
        *) step=1 ;;
    esac
    awk -v s="$step" 'NR % s == 0 { print }' "$f" | sort -u | while IFS= read -r line; do
        printf '%s' "$line" | put corpus/parse_line
    done
done
grep -oh '"handoff_token":"[^"]*"' $logs | sort -u | head -200 | while IFS= read -r kv; do
    tok=${kv#\"handoff_token\":\"}
    tok=${tok%\"}
    printf '%s' "$tok" | put corpus/token_decode
    # token_decode also wraps its input as claims: seed it with decoded ones
    body=$tok
    [[ $tok == *.*.* ]] && body=$(cut -d. -f2 <<<"$tok")
    while (( ${#body} % 4 )); do body+="="; done
    printf '%s' "$body" | tr '_-' '/+' | base64 -d 2>/dev/null | put corpus/token_decode || true
done
for d in corpus/*; do echo "$d: $(ls "$d" | wc -l) seeds"; done
