"""The report's "what happened" section reads fault resolutions and broker logs."""

from kafka_chaos.reports.mechanism import mechanism_section
from kafka_chaos.reports.render import render_report


def write_log(run_dir, node, text):
    path = run_dir / "logs" / node / "logs" / "server.log"
    path.parent.mkdir(parents=True)
    path.write_text(text)


def test_truncation_below_high_watermark_and_elections_are_found(tmp_path):
    write_log(
        tmp_path,
        "n1",
        (
            "[t] WARN [UnifiedLog partition=chaos-x-0, dir=/d] Truncating chaos-x-0 to offset 1132 "
            "below high watermark 3787 (UnifiedLog)\n"
            "[t] WARN Truncating other-0 to offset 1 below high watermark 9 (UnifiedLog)\n"
            "[t] INFO Truncating to 0 has no effect\n"
        ),
    )
    write_log(
        tmp_path,
        "n2",
        (
            "[t] INFO [QuorumController id=2] Periodic task electUnclean generated 0 records\n"
            "[t] INFO [QuorumController id=2] Periodic task electUnclean generated 1 records\n"
            "\tunclean.leader.election.enable = true\n"
        ),
    )
    ops = [
        {"id": 0, "f": "unclean-election", "resolved": {"killed": "n1", "elected": "n2"}},
        {"id": 1, "f": "kill"},
    ]
    got = mechanism_section(tmp_path, "chaos-x", ops)
    assert got["resolved"] == [
        {"id": 0, "f": "unclean-election", "details": {"killed": "n1", "elected": "n2"}}
    ]
    assert [
        (t["node"], t["partition"], t["to"], t["hw"], t["discarded"]) for t in got["truncations"]
    ] == [("n1", "chaos-x-0", 1132, 3787, 2655)]
    assert [e["node"] for e in got["elections"]] == ["n2"]


def test_log_text_is_escaped_in_the_report(tmp_path):
    (tmp_path / "config.json").write_text('{"topic_name_used": "t"}')
    write_log(
        tmp_path,
        "n1",
        (
            "x Truncating t-0 to offset 1 below high watermark 5\n"
            "Unclean leader election <script>alert(1)</script>\n"
        ),
    )
    html = render_report(tmp_path)
    assert "offsets discarded" in html
    assert "Unclean leader election &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
