"""`bench --json` keys and `--profile` output (a valid Chrome trace plus a per-op table)."""
from __future__ import annotations

import json
import subprocess


def test_bench_json_contract(pllm_bin, smollm2_path):
    p = subprocess.run([str(pllm_bin), "bench", "-m", str(smollm2_path), "-p", "16", "-n", "4", "-r", "2",
                        "-t", "2", "--bw-mib", "16", "--json"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    j = json.loads(p.stdout)
    for key in ("pp_tps", "pp_sd", "tg_tps", "tg_sd", "ttft_ms", "peak_rss_mb", "weights_mb", "roofline_tps"):
        assert isinstance(j[key], (int, float)), key
    assert j["pp_tps"] > 0 and j["tg_tps"] > 0 and j["roofline_tps"] > 0
    # The weights of the file are ~96.6 MB; peak RSS must at least hold what decoding touches.
    assert 90 < j["weights_mb"] < 100
    assert j["peak_rss_mb"] > 50


def test_bench_f16_act_flag(pllm_bin, smollm2_path):
    """`bench --f16-act` (the older spelling) and `--act f16` run and report the mode (json key and
    the text header); without a flag the default, int16."""
    base = [str(pllm_bin), "bench", "-m", str(smollm2_path), "-p", "8", "-n", "2", "-r", "1", "-t", "2",
            "--bw-mib", "16"]
    p = subprocess.run(base + ["--f16-act", "--json"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    j = json.loads(p.stdout)
    assert j["act"] == "f16" and j["tg_tps"] > 0
    p = subprocess.run(base + ["--act", "f16"], capture_output=True, timeout=300)
    assert p.returncode == 0 and "(f16 activations)" in p.stdout.decode()
    p = subprocess.run(base + ["--json"], capture_output=True, timeout=300)
    assert p.returncode == 0 and json.loads(p.stdout)["act"] == "int16", "the default mode's word"


def test_profile_writes_trace_and_table(pllm_bin, smollm2_path, tmp_path):
    trace = tmp_path / "trace.json"
    p = subprocess.run([str(pllm_bin), "run", "-m", str(smollm2_path), "-p", "Hi", "--temp", "0", "-n", "4",
                        "--profile", "--trace-out", str(trace)], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    err = p.stderr.decode()
    for op in ("qkv", "attention", "gate_up", "ffn_down", "output_head"):
        assert f"\n{op} " in err, err
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["name"] for e in events}
    assert {"qkv", "attention", "gate_up", "ffn_down"} <= names
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    # 30 layers: every per-layer op appears a multiple of 30 times.
    assert sum(1 for e in events if e["name"] == "qkv") % 30 == 0


def test_no_fuse_gives_identical_logits(pllm_bin, smollm2_path, tmp_path):
    ids = "1 4093 198 1780 314 260 3575 282 4649 47"
    outs = []
    for extra in ([], ["--no-fuse"]):
        out = tmp_path / f"l{len(outs)}.bin"
        p = subprocess.run([str(pllm_bin), "logits", "-m", str(smollm2_path), "--ids", ids, "--out", str(out),
                            *extra], capture_output=True, timeout=300)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]  # grouping jobs must not change a single bit


def test_chat_bench_modes(pllm_bin, tiny_models_paths, tmp_path):
    """The scripted chat workload: per turn TTFT and reuse; the RAM cache restores the
    system prompt for a fresh session per turn, the session mode reuses its own cache, and
    the no-cache mode reuses nothing."""
    import pllm_cli
    text = tmp_path / "sys.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 80)
    model = tiny_models_paths["llama-F32"]
    out = {}
    for mode in ("none", "session", "ram"):
        proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, [
            "chat-bench", "-m", model, "-f", text, "--system-tokens", "150", "--turns", "3", "-n", "2",
            "--cps", "10000", "--mode", mode, "-t", "1", "-c", "1024", "--json"]))
        out[mode] = json.loads(proc.stdout)
        assert len(out[mode]["ttft_ms"]) == 3 and out[mode]["ttft_p95_ms"] >= out[mode]["ttft_p50_ms"] > 0
    assert sum(out["none"]["reused_tokens"]) == 0
    assert all(r > 0 for r in out["session"]["reused_tokens"][1:])
    assert all(c >= 128 for c in out["ram"]["cached_tokens"][1:]), out["ram"]
    assert out["ram"]["restored_tokens"] > 0
    proc = pllm_cli.run_cli(pllm_bin, ["chat-bench", "-m", model, "-f", text, "--mode", "disk"])
    assert "--mode disk needs --cache-dir" in pllm_cli.assert_clean_error(proc)
