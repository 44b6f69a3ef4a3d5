"""JSON Lines in, Megatron's indexed dataset out: the inputs of
data-prepare.test and the check of what `hypipe data prepare` wrote.

  prepared-data.py make TEXT OUT.jsonl KEY DOCUMENTS
      writes DOCUMENTS lines from the lines of TEXT: most a string under KEY,
      every 7th a list of strings (one sequence each, as Megatron's
      preprocess_data.py takes them), every 11th an empty string (a document
      without sequences), some with non-ASCII text, and a blank line.
  prepared-data.py check PREFIX IN.jsonl KEY (bytes | SPM.model) [--append-eod]
                        [+ PREFIX IN.jsonl KEY ...]
      reads each PREFIX with megatron-core's IndexedDataset and compares
      documents, sequences and tokens with the reference: Python's UTF-8
      bytes, or the ids of the `spm_encode --output_format=id` CLI, grouped by
      the rules of Megatron's Encoder.encode written out below; the
      end-of-document id is the line of `</s>` in the model's .vocab file
      (spm_train's listing), for bytes megatron-core's ByteLevelTokenizer's
      eod. Each is checked again against a reference with
      one token changed, which must be found (the check can fail). One
      process for all, since importing megatron-core takes seconds.
  prepared-data.py trained PREFIX LOG VOCAB
      hypipe-run's --json-log of a run on PREFIX: its unigram_entropy equals
      the entropy of the tokens megatron-core reads, the first loss is within
      10% of ln(VOCAB) (an untrained model's guess), and the last five
      steps' mean loss is below the first.
"""
import json
import subprocess
import sys


def make(text_path, out_path, key, count):
    lines = [l.strip() for l in open(text_path, encoding="utf-8") if l.strip()]
    with open(out_path, "w", encoding="utf-8") as out:
        for i in range(count):
            line = lines[i % len(lines)]
            if i % 11 == 5:
                value = ""
            elif i % 7 == 3:
                value = [line, "naïve café, ünïcödé " + str(i), ""]
            elif i % 13 == 0:
                value = "Grüße — " + line
            else:
                value = line
            out.write(json.dumps({"id": i, key: value}, ensure_ascii=i % 2 == 0))
            out.write("\n")
            if i == 2:
                out.write("   \n")  # a blank line is no document


def encode_all(sequences, tokenizer):
    """The token ids of every sequence, by an independent tokenizer."""
    if tokenizer == "bytes":
        return [list(s.encode("utf-8")) for s in sequences]
    text = "".join(s + "\n" for s in sequences)
    out = subprocess.run(["spm_encode", "--model=" + tokenizer,
                          "--output_format=id"], input=text.encode("utf-8"),
                         stdout=subprocess.PIPE, check=True).stdout
    rows = out.decode().split("\n")[:len(sequences)]
    return [[int(t) for t in row.split()] for row in rows]


def reference(jsonl, key, tokenizer, append_eod):
    """Megatron's Encoder.encode: a list is one sequence per string, a
    sequence without tokens is dropped, the EOD joins the last sequence of a
    document that has tokens. Documents and sequence lengths per line."""
    docs = []
    for line in open(jsonl, encoding="utf-8"):
        if not line.strip():
            continue
        value = json.loads(line)[key]
        docs.append(value if isinstance(value, list) else [value])
    flat = [s for doc in docs for s in doc]
    ids = iter(encode_all(flat, tokenizer))
    eod = None
    if append_eod and tokenizer == "bytes":
        from megatron.core.tokenizers.text.libraries.bytelevel_tokenizer \
            import ByteLevelTokenizer
        eod = ByteLevelTokenizer().eod
    elif append_eod:
        vocab = open(tokenizer[:-len(".model")] + ".vocab", encoding="utf-8")
        eod = [l.split("\t")[0] for l in vocab].index("</s>")
    out = []
    for doc in docs:
        sequences = [s for s in (next(ids) for _ in doc) if s]
        if sequences and eod is not None:
            sequences[-1] = sequences[-1] + [eod]
        out.append(sequences)
    return out


def differences(dataset, expected):
    """What differs between megatron-core's reading and the reference."""
    boundaries = [0]
    for doc in expected:
        boundaries.append(boundaries[-1] + len(doc))
    sequences = [s for doc in expected for s in doc]
    problems = []
    if list(dataset.document_indices) != boundaries:
        problems.append("document boundaries differ")
    if list(dataset.sequence_lengths) != [len(s) for s in sequences]:
        problems.append("sequence lengths differ")
    for i, want in enumerate(sequences):
        if i < len(dataset) and list(dataset[i]) != want:
            problems.append(f"sequence {i}: {list(dataset[i])[:8]}... != {want[:8]}...")
            break
    return problems


def check(prefix, jsonl, key, tokenizer, flags):
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    expected = reference(jsonl, key, tokenizer, "--append-eod" in flags)
    dataset = IndexedDataset(prefix)
    problems = differences(dataset, expected)
    for p in problems:
        print("DIFFERENT:", p)
    sequences = [s for doc in expected for s in doc]
    print(f"{prefix.split('/')[-1]}: {len(expected)} documents, "
          f"{len(sequences)} sequences, {sum(map(len, sequences))} tokens, "
          f"dtype {dataset.index.dtype.__name__}, {len(problems)} differences "
          f"from the reference")
    expected[1][0][0] += 1
    planted = differences(dataset, expected)
    print(f"{prefix.split('/')[-1]}: a planted change is found: {planted}")
    return 1 if problems or not planted else 0


def trained(prefix, log, vocab):
    import collections
    import math
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    dataset = IndexedDataset(prefix)
    counts = collections.Counter(t for i in range(len(dataset))
                                 for t in dataset[i].tolist())
    total = sum(counts.values())
    entropy = -sum(c / total * math.log(c / total) for c in counts.values())
    steps = [json.loads(line) for line in open(log)]
    first, last = steps[0]["loss"], sum(s["loss"] for s in steps[-5:]) / 5
    print(f"{len(steps)} steps, first loss {first:.4f} (ln {vocab} = "
          f"{math.log(vocab):.4f}), last-5 mean {last:.4f}, unigram entropy "
          f"{entropy:.4f} (logged {steps[0].get('unigram_entropy')})")
    ok = (abs(steps[0].get("unigram_entropy", 0) - entropy) < 1e-6 * entropy
          and abs(first - math.log(vocab)) < 0.1 * math.log(vocab)
          and last < first)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif sys.argv[1] == "trained":
        sys.exit(trained(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:
        args, failed = sys.argv[2:], 0
        while args:
            this = args[:args.index("+")] if "+" in args else args
            args = args[len(this) + 1:]
            failed |= check(this[0], this[1], this[2], this[3], this[4:])
        sys.exit(failed)
