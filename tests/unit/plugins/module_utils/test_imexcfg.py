# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import os

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._imexcfg import (
    KNOWN_KEYS,
    ConfigError,
    ConfigFile,
    apply_settings,
    normalize_setting,
    validate_settings,
)

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "files")


@pytest.fixture(scope="module")
def stock():
    with open(os.path.join(SAMPLES, "stock_config.cfg"), "rb") as handle:
        return handle.read().decode("utf-8")


# --- parsing and rendering ---------------------------------------------------------------------

def test_stock_file_parses_all_keys(stock):
    config = ConfigFile(stock)
    keys = [key for _line, key, _value in config.items()]
    assert len(keys) == 33
    assert keys[0] == "LOG_LEVEL" and keys[-1] == "IMEX_NODE_DISCONNECTED_GRACE_TIME"
    assert config.get("SERVER_PORT") == "50000"
    assert config.get("IMEX_CMD_PORT") == "50005"
    assert config.get("BIND_INTERFACE_IP") == ""
    assert config.get("IMEX_GSS_TIMEOUT_SEC") == "30"
    assert config.get("NO_SUCH_KEY") is None
    # the comment examples ("IMEX_AUTH_ENCRYPTIPON_MODE must be configured") are not settings
    assert config.get("IMEX_AUTH_ENCRYPTIPON_MODE") is None


def test_stock_file_keys_are_exactly_the_known_keys(stock):
    assert sorted(key for _line, key, _value in ConfigFile(stock).items()) == sorted(KNOWN_KEYS)


def test_every_stock_value_passes_validation_unchanged(stock):
    for _line, key, value in ConfigFile(stock).items():
        assert normalize_setting(key, value) == value


def test_render_without_edits_is_byte_identical(stock):
    assert ConfigFile(stock).render() == stock
    assert ConfigFile("").render() == ""
    assert ConfigFile("A=1").render() == "A=1"


def test_set_changes_only_that_line(stock):
    config = ConfigFile(stock)
    assert config.set("SERVER_PORT", "50001") is True
    before, after = stock.split("\n"), config.render().split("\n")
    assert len(before) == len(after)
    changed = [(old, new) for old, new in zip(before, after) if old != new]
    assert changed == [("SERVER_PORT=50000", "SERVER_PORT=50001")]


def test_set_same_value_is_no_change(stock):
    config = ConfigFile(stock)
    assert config.set("IMEX_CMD_PORT", "50005") is False
    assert config.render() == stock


def test_new_key_is_appended_at_the_end(stock):
    config = ConfigFile(stock)
    assert config.set("IMEX_CONN_WAIT_TIMEOUT", "70") is True
    assert config.render() == stock + "IMEX_CONN_WAIT_TIMEOUT=70\n"


def test_new_key_after_file_without_final_newline():
    config = ConfigFile("A=1")
    config.set("B", "2")
    assert config.render() == "A=1\nB=2\n"
    empty = ConfigFile("")
    empty.set("B", "2")
    assert empty.render() == "B=2\n"


def test_commented_out_key_is_left_alone():
    text = "# example:\n#SERVER_PORT=1234\n# SERVER_PORT=1\nLOG_LEVEL=4\n"
    config = ConfigFile(text)
    assert config.get("SERVER_PORT") is None
    config.set("SERVER_PORT", "50000")
    assert config.render() == text + "SERVER_PORT=50000\n"
    assert config.set("SERVER_PORT", None) is True
    assert config.render() == text


def test_remove_key_drops_only_its_line(stock):
    config = ConfigFile(stock)
    assert config.set("STATS_FILE_NAME", None) is True
    rendered = config.render()
    assert "STATS_FILE_NAME=/var/log/nvidia-imex-stats.log\n" not in rendered
    assert rendered == stock.replace("STATS_FILE_NAME=/var/log/nvidia-imex-stats.log\n", "")
    assert "#   Note: If STATS_FILE_NAME is configured same as LOG_FILE_NAME" in rendered
    assert config.set("STATS_FILE_NAME", None) is False


def test_duplicate_lines_all_get_the_value():
    text = "SERVER_PORT=1\nLOG_LEVEL=4\nSERVER_PORT=2\n"
    config = ConfigFile(text)
    assert config.get("SERVER_PORT") == "2"
    config.set("SERVER_PORT", "50000")
    assert config.render() == "SERVER_PORT=50000\nLOG_LEVEL=4\nSERVER_PORT=50000\n"
    config.set("SERVER_PORT", None)
    assert config.render() == "LOG_LEVEL=4\n"


def test_crlf_line_endings_are_kept():
    config = ConfigFile("# c\r\nLOG_LEVEL=4\r\nSERVER_PORT=1\r\n")
    config.set("SERVER_PORT", "2")
    config.set("DAEMONIZE", "1")
    assert config.render() == "# c\r\nLOG_LEVEL=4\r\nSERVER_PORT=2\r\nDAEMONIZE=1\r\n"


def test_non_canonical_line_is_read_tolerantly_and_rewritten():
    config = ConfigFile("  SERVER_PORT = 50000  \nLOG_LEVEL=4\n")
    assert config.get("SERVER_PORT") == "50000"
    assert config.set("SERVER_PORT", "50000") is True
    assert config.render() == "SERVER_PORT=50000\nLOG_LEVEL=4\n"


def test_apply_settings_returns_effective_values(stock):
    text, effective = apply_settings(stock, {"IMEX_CMD_PORT": "50006", "STATS_FILE_NAME": None, "NEW_KEY": "x"})
    assert effective == {"IMEX_CMD_PORT": "50006", "STATS_FILE_NAME": None, "NEW_KEY": "x"}
    assert "IMEX_CMD_PORT=50006\n" in text and text.endswith("NEW_KEY=x\n")


# --- validation --------------------------------------------------------------------------------

@pytest.mark.parametrize("key, value, expected", [
    ("SERVER_PORT", 50000, "50000"),
    ("SERVER_PORT", "1", "1"),
    ("IMEX_CMD_PORT", "65535", "65535"),
    ("SERVER_PORT", "050000", "50000"),
    ("DAEMONIZE", True, "1"),
    ("IMEX_CMD_ENABLED", False, "0"),
    ("LOG_USE_SYSLOG", 1, "1"),
    ("LOG_APPEND_TO_LOG", "0", "0"),
    ("IMEX_ENABLE_AUTH_ENCRYPTION", "1", "1"),
    ("IMEX_GSS_SHUTDOWN_ON_FAILURE", "1", "1"),
    ("LOG_LEVEL", 0, "0"),
    ("LOG_LEVEL", "4", "4"),
    ("IMEX_WAIT_FOR_QUORUM", "NONE", "NONE"),
    ("IMEX_WAIT_FOR_QUORUM", "FULL", "FULL"),
    ("IMEX_AUTH_ENCRYPTION_MODE", "GSS_AUTH_ONLY", "GSS_AUTH_ONLY"),
    ("IMEX_AUTH_SOURCE", "", ""),
    ("IMEX_AUTH_SOURCE", "ENV_VAL", "ENV_VAL"),
    ("IMEX_GSS_TIMEOUT_SEC", -1, "-1"),
    ("IMEX_GSS_SEC_CONTEXT_LIFETIME_SEC", "-1", "-1"),
    ("IMEX_NODE_DISCONNECTED_GRACE_TIME", "-1", "-1"),
    ("IMEX_NODE_DISCONNECTED_GRACE_TIME", 300, "300"),
    ("LOG_MAX_ROTATE_COUNT", 0, "0"),
    ("BIND_INTERFACE_IP", "10.0.0.1", "10.0.0.1"),
    ("BIND_INTERFACE_IP", "", ""),
    ("IMEX_CMD_BIND_INTERFACE_IP", "2001:db8::1", "2001:db8::1"),
    ("LOG_FILE_NAME", "", ""),
    ("LOG_FILE_NAME", "/" + "a" * 255, "/" + "a" * 255),
    ("IMEX_NODE_CONFIG_FILE", "/etc/nvidia-imex/nodes_config.cfg", "/etc/nvidia-imex/nodes_config.cfg"),
    ("IMEX_CMD_UNIX_DOMAIN_PATH", "/etc/nvidia-imex/imex_ctrl.sock", "/etc/nvidia-imex/imex_ctrl.sock"),
    ("NETWORK_INTERFACE", "enP2s2f1", "enP2s2f1"),
    ("NETWORK_INTERFACE", "", ""),
    ("IMEX_SERVER_KEY", "IMEX_KEY_ENV", "IMEX_KEY_ENV"),
    ("IMEX_SECURITY_TARGET_OVERRIDE", "localhost", "localhost"),
])
def test_valid_values_are_normalized(key, value, expected):
    assert normalize_setting(key, value) == expected


@pytest.mark.parametrize("key, value, wanted", [
    ("SERVER_PORT", 0, "an integer from 1 to 65535"),
    ("SERVER_PORT", "65536", "an integer from 1 to 65535"),
    ("IMEX_CMD_PORT", "50005a", "an integer from 1 to 65535"),
    ("IMEX_CMD_PORT", "+50005", "an integer from 1 to 65535"),
    ("IMEX_CMD_PORT", "5_0005", "an integer from 1 to 65535"),
    ("DAEMONIZE", "yes", "0 or 1"),
    ("IMEX_CMD_ENABLED", 2, "0 or 1"),
    ("LOG_LEVEL", 5, "an integer from 0 to 4"),
    ("LOG_LEVEL", -1, "an integer from 0 to 4"),
    ("IMEX_WAIT_FOR_QUORUM", "none", "one of 'NONE', 'RECOVERY', 'FULL'"),
    ("IMEX_AUTH_ENCRYPTION_MODE", "", "one of 'SSL_TLS'"),
    ("IMEX_AUTH_SOURCE", "PATH", "one of '', 'FILE'"),
    ("IMEX_GSS_TIMEOUT_SEC", -2, "an integer >= -1"),
    ("IMEX_GSS_RETRY_INTERVAL_SEC", -1, "an integer >= 0"),
    ("LOG_FILE_MAX_SIZE", -5, "an integer >= 0"),
    ("BIND_INTERFACE_IP", "10.0.0.256", "an IPv4/IPv6 address or empty"),
    ("IMEX_CMD_BIND_INTERFACE_IP", "tray01", "an IPv4/IPv6 address or empty"),
    ("LOG_FILE_NAME", "var/log/imex.log", "an absolute path"),
    ("LOG_FILE_NAME", "/" + "a" * 256, "at most 256 characters"),
    ("IMEX_NODE_CONFIG_FILE", "", "an absolute path of at most 256 characters"),
    ("NETWORK_INTERFACE", "a-very-long-interface-name", "a network interface name"),
    ("NETWORK_INTERFACE", "eth0:1", "a network interface name"),
])
def test_invalid_values_name_key_value_and_rule(key, value, wanted):
    with pytest.raises(ConfigError) as err:
        normalize_setting(key, value)
    message = str(err.value)
    assert message.startswith("%s: value %r" % (key, str(value)))
    assert wanted in message


@pytest.mark.parametrize("value, wanted", [
    ("/var/log/a\nSERVER_PORT=1", "line break"),
    ("/var/log/a\r", "line break"),
    (" /var/log/a", "leading or trailing blanks"),
    ("/var/log/a ", "leading or trailing blanks"),
    ("/var/log/a#b", "'#'"),
])
def test_values_must_be_single_plain_lines(value, wanted):
    with pytest.raises(ConfigError) as err:
        normalize_setting("LOG_FILE_NAME", value)
    assert "LOG_FILE_NAME: value %r" % value in str(err.value)
    assert wanted in str(err.value)


def test_newline_is_refused_even_for_unknown_keys():
    with pytest.raises(ConfigError, match="line break"):
        normalize_setting("CUSTOM", "a\nb", allow_unknown=True)


def test_boolean_for_non_flag_key_is_refused():
    with pytest.raises(ConfigError, match=r"SERVER_PORT: value True is a boolean"):
        normalize_setting("SERVER_PORT", True)


@pytest.mark.parametrize("value", [1.5, ["a"], {"a": 1}])
def test_other_types_are_refused(value):
    with pytest.raises(ConfigError, match="LOG_LEVEL: value .* is a"):
        normalize_setting("LOG_LEVEL", value)


def test_unknown_key_refused_unless_allowed():
    with pytest.raises(ConfigError) as err:
        normalize_setting("IMEX_CONN_WAIT_TIMEOUT", 70)
    assert "IMEX_CONN_WAIT_TIMEOUT: unknown config.cfg key (value '70')" in str(err.value)
    assert "allow_unknown" in str(err.value)
    assert normalize_setting("IMEX_CONN_WAIT_TIMEOUT", 70, allow_unknown=True) == "70"


def test_unknown_key_differing_in_case_gets_a_hint():
    with pytest.raises(ConfigError, match="did you mean SERVER_PORT"):
        normalize_setting("server_port", 50000)


@pytest.mark.parametrize("key", ["BAD KEY", "A=B", "#KEY", "1KEY", "", 5])
def test_malformed_key_names_are_refused_even_when_unknown_allowed(key):
    with pytest.raises(ConfigError, match="not a valid config.cfg key"):
        normalize_setting(key, "1", allow_unknown=True)
    with pytest.raises(ConfigError, match="not a valid config.cfg key"):
        validate_settings({key: None}, allow_unknown=True)


def test_validate_settings_reports_every_problem_and_passes_none():
    with pytest.raises(ConfigError) as err:
        validate_settings({"SERVER_PORT": 0, "LOG_LEVEL": 9, "DAEMONIZE": 1})
    message = str(err.value)
    assert "SERVER_PORT: value '0'" in message and "LOG_LEVEL: value '9'" in message
    assert "DAEMONIZE" not in message
    assert validate_settings({"SERVER_PORT": 50001, "STATS_FILE_NAME": None}) == {
        "SERVER_PORT": "50001", "STATS_FILE_NAME": None}


def test_error_lists_problems_separately_without_inner_separators():
    with pytest.raises(ConfigError) as err:
        validate_settings({"IMEX_CONN_WAIT_TIMEOUT": 70, "SERVER_PORT": True, "LOG_FILE_NAME": " /x"})
    assert len(err.value.problems) == 3
    assert all("; " not in problem for problem in err.value.problems)
    assert str(err.value) == "; ".join(err.value.problems)
