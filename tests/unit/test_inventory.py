"""SSH inventories in TOML and YAML: good files and named errors for bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_chaos.harness.backends.ssh_inventory import load_inventory, nodes_from_inventory
from kafka_chaos.harness.errors import ConfigError


@pytest.fixture()
def key(tmp_path: Path) -> Path:
    path = tmp_path / "id_ed25519"
    path.write_text("not read by the parser\n")
    return path


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_with_defaults_and_overrides(tmp_path: Path, key: Path) -> None:
    inv = load_inventory(
        write(
            tmp_path,
            "hosts.toml",
            f"""
[[hosts]]
host = "kafka1.example"
key = "{key}"

[[hosts]]
host = "203.0.113.7"
port = 2222
user = "admin"
address = "10.0.0.2"
name = "broker-b"
""",
        )
    )
    first, second = inv.hosts
    assert (first.name, first.host, first.port, first.user) == ("n1", "kafka1.example", 22, "root")
    assert (first.key, first.address) == (str(key), "kafka1.example")
    assert (second.name, second.port, second.user, second.key) == ("broker-b", 2222, "admin", None)
    assert second.address == "10.0.0.2"
    assert inv.known_hosts is None


def test_yaml_mapping_and_bare_list(tmp_path: Path, key: Path) -> None:
    known = write(tmp_path, "known_hosts", "")
    inv = load_inventory(
        write(
            tmp_path,
            "hosts.yaml",
            f"known_hosts: {known}\nhosts:\n  - host: a\n    key: {key}\n  - host: b\n",
        )
    )
    assert [h.host for h in inv.hosts] == ["a", "b"]
    assert inv.known_hosts == str(known)
    bare = load_inventory(write(tmp_path, "list.yml", "- host: x\n- {host: y, port: 23}\n"))
    assert [(h.host, h.port) for h in bare.hosts] == [("x", 22), ("y", 23)]


def test_nodes_take_the_first_n_hosts(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "h.yaml", "- host: a\n- host: b\n- host: c\n"))
    nodes = nodes_from_inventory(inv, "prod", 2, "/kh")
    assert [(n.name, n.node_id, n.address) for n in nodes] == [("n1", 1, "a"), ("n2", 2, "b")]
    assert nodes[0].root_dir == "/var/lib/kafka-chaos/prod"
    assert nodes[0].ssh.known_hosts == "/kh"
    with pytest.raises(ConfigError, match="5 nodes requested but the inventory lists only 3"):
        nodes_from_inventory(inv, "prod", 5, "/kh")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("h.toml", "[[hosts]]\nhost = \n", r"h\.toml: not valid TOML"),
        ("h.yaml", "hosts: [host: a\n", r"h\.yaml: not valid YAML"),
        ("h.ini", "[hosts]\n", r"must be \.toml, \.yaml or \.yml"),
        ("h.yaml", "hosts: []\n", "`hosts` must be a non-empty list"),
        ("h.yaml", "42\n", "expected a table/mapping with a `hosts` list"),
        ("h.yaml", "hosts:\n  - host: a\n  - 7\n", r"hosts\[2\]: expected a table/mapping"),
        ("h.yaml", "hosts:\n  - port: 22\n", r"hosts\[1\] \(\?\): `host` is required"),
        ("h.yaml", "hosts:\n  - {host: a, port: 0}\n", r"hosts\[1\] \(a\): `port` must be"),
        ("h.yaml", "hosts:\n  - {host: a, port: '22'}\n", "`port` must be an integer"),
        ("h.yaml", "hosts:\n  - {host: a, prot: 22}\n", r"unknown key\(s\) prot"),
        ("h.yaml", "hosts:\n  - {host: a, user: ''}\n", "`user` must be a non-empty string"),
        ("h.yaml", "hosts:\n  - {host: a, key: /nonexistent/k}\n", "key file /nonexistent/k"),
        ("h.yaml", "hosts:\n  - {host: a}\n  - {host: a}\n", "same address 'a'"),
        ("h.yaml", "hosts:\n  - {host: a, name: x}\n  - {host: b, name: x}\n", "same name 'x'"),
        ("h.yaml", "hosts: [{host: a}]\nknown_hosts: /nope\n", "known_hosts '/nope' is not"),
        ("h.yaml", "hosts: [{host: a}]\nextra: 1\n", r"unknown key\(s\) extra"),
    ],
)
def test_malformed_inventory_names_file_and_entry(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(ConfigError, match=message) as err:
        load_inventory(path)
    assert str(path) in str(err.value)


def test_missing_inventory_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such inventory file"):
        load_inventory(tmp_path / "absent.toml")
