"""The tls.* keys: Apache's names and defaults, ``tls.config.file`` over the config file, refusals at start."""

from __future__ import annotations

import pytest

from ferrymq.remoting.tls import TlsMode
from ferrymq.server.config import ConfigError, TlsConfig, known_keys, tls_config, to_properties
from ferrymq.testing.certs import make_certs


def test_defaults_are_apaches_permissive_test_mode_with_plain_outgoing_connections(tmp_path):
    tls = tls_config({"tls.config.file": str(tmp_path / "absent.properties")})
    assert tls.mode is TlsMode.PERMISSIVE and tls.test_mode
    assert tls.server_tls() is not None
    assert tls.client_tls() is None
    assert "tls.server.need.client.auth" in known_keys(TlsConfig)


def test_enforcing_makes_the_servers_own_connections_tls_unless_tls_enable_says_otherwise():
    assert tls_config({"tls.server.mode": "enforcing"}).client_tls() is not None
    assert tls_config({"tls.server.mode": "enforcing", "tls.enable": "false"}).client_tls() is None
    assert tls_config({"tls.server.mode": "disabled", "tls.enable": "true"}).client_tls() is not None
    assert tls_config({"tls.server.mode": "disabled"}).server_tls() is None


def test_the_tls_config_file_wins_except_for_the_mode(tmp_path):
    certs = make_certs(tmp_path, key_password="pw")
    file = tmp_path / "tls.properties"
    file.write_text(f"tls.server.mode=disabled\ntls.test.mode.enable=false\ntls.server.certPath={certs.server.cert}\n"
                    f"tls.server.keyPath={certs.server.key}\ntls.server.keyPassword=pw\n")
    tls = tls_config({"tls.server.mode": "enforcing", "tls.config.file": str(file),
                      "tls.server.certPath": "/nowhere.pem"})
    assert tls.mode is TlsMode.ENFORCING
    assert tls.server_cert_path == str(certs.server.cert)
    assert tls.server_tls().own.key_password == "pw"
    assert "tls.server.keyPassword=<hidden>" in to_properties(tls)


@pytest.mark.parametrize("props, told", [
    ({"tls.server.mode": "strict"}, "tls.server.mode=strict: not valid, expected one of disabled, permissive"),
    ({"tls.test.mode.enable": "false"}, "needs tls.server.certPath and tls.server.keyPath"),
    ({"tls.test.mode.enable": "false", "tls.server.certPath": "/nowhere.pem", "tls.server.keyPath": "/nowhere.key"},
     "tls.server.certPath/keyPath/keyPassword/trustCertPath: cannot be used"),
])
def test_a_setting_that_cannot_work_is_refused(props, told, tmp_path):
    with pytest.raises(ConfigError, match=told.replace("(", r"\(")):
        tls_config({"tls.config.file": str(tmp_path / "absent"), **props}).server_tls()
