"""Upsert perfcast's folder, data source, dashboards and alert rules into a running Grafana
through its HTTP API (``grafana-client``), idempotently.

Every object is read first and written only if it is missing or differs from what perfcast
generates, so a second push sends no writes. "Differs" means: some value perfcast sets is not
what Grafana holds (what Grafana adds on its own -- ids, versions, timestamps, defaults --
is ignored). Grafana never returns a stored secret, so a changed InfluxDB token cannot be
seen: ``update_token=True`` sends it regardless (after rotating the token).

Objects are identified by uid: folder ``perfcast``, data source ``perfcast-influxdb``,
dashboards ``perfcast-overview`` and ``perfcast-system``, rules ``perfcast-<kind>`` in the
rule group ``perfcast``; rules of that group that perfcast no longer generates are deleted.
Objects provisioned from files are read-only in the API: push reports them instead of
failing halfway (use either the files or push on one Grafana, not both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from streams.core.config import ConfigError, secret
from streams.grafana.rules import FOLDER_TITLE, FOLDER_UID, GROUP, INTERVAL_S

__all__ = ["PushError", "PushResult", "grafana_token", "connect", "push", "contains"]

TOKEN_ENV = "PERFCAST_GRAFANA_TOKEN"


class PushError(RuntimeError):
    """Grafana refused an object, or holds it in a form push must not overwrite."""


@dataclass
class PushResult:
    """What push did per object: ``(kind, uid, action)``, action one of ``created``,
    ``updated``, ``unchanged``, ``deleted``."""

    actions: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, kind: str, uid: str, action: str) -> None:
        self.actions.append((kind, uid, action))

    @property
    def writes(self) -> int:
        return sum(a != "unchanged" for _, _, a in self.actions)


def grafana_token(env: Mapping[str, str]) -> str:
    """The Grafana service-account token: ``PERFCAST_GRAFANA_TOKEN``, or the contents of the
    file named by ``PERFCAST_GRAFANA_TOKEN_FILE`` (as :mod:`streams.core.config` reads secrets)."""
    token = secret(env, TOKEN_ENV)
    if not token:
        raise ConfigError(f"{TOKEN_ENV}: not set (a Grafana service-account token, or "
                          f"{TOKEN_ENV}_FILE naming a file that holds it)")
    return token


def connect(url: str, token: str, timeout: float = 10.0) -> Any:
    """A ``grafana_client.GrafanaApi`` for ``url`` authenticating with the bearer ``token``."""
    from grafana_client import GrafanaApi

    return GrafanaApi.from_url(url, credential=token, timeout=timeout)


def contains(held: Any, wanted: Any) -> bool:
    """Whether ``held`` (what Grafana returns) has every value of ``wanted`` (what perfcast
    sends): dictionaries may hold more keys, lists must match item by item."""
    if isinstance(wanted, dict):
        return isinstance(held, dict) and all(k in held and contains(held[k], v)
                                              for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(held, list) and len(held) == len(wanted) and all(
            contains(h, w) for h, w in zip(held, wanted))
    return held == wanted


def _get(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``, ``None`` when Grafana answers 404."""
    from grafana_client.client import GrafanaClientError

    try:
        return call(*args)
    except GrafanaClientError as err:
        if err.status_code == 404:
            return None
        raise


def _refuse(kind: str, uid: str, why: str) -> PushError:
    return PushError(f"{kind} {uid!r}: {why}; not overwritten (use either the provisioning "
                     f"files or 'perfcast grafana push' on one Grafana)")


def _folder(api: Any, result: PushResult) -> None:
    held = _get(api.folder.get_folder, FOLDER_UID)
    if held is None:
        api.folder.create_folder(FOLDER_TITLE, uid=FOLDER_UID)
        result.add("folder", FOLDER_UID, "created")
    elif held.get("title") != FOLDER_TITLE:
        api.folder.update_folder(FOLDER_UID, title=FOLDER_TITLE, overwrite=True)
        result.add("folder", FOLDER_UID, "updated")
    else:
        result.add("folder", FOLDER_UID, "unchanged")


def _datasource(api: Any, ds: dict[str, Any], update_token: bool, result: PushResult) -> None:
    uid = ds["uid"]
    held = _get(api.datasource.get_datasource_by_uid, uid)
    if held is None:
        api.datasource.create_datasource(ds)
        result.add("datasource", uid, "created")
        return
    visible = {k: v for k, v in ds.items() if k != "secureJsonData"}
    token_held = bool((held.get("secureJsonFields") or {}).get("token"))
    token_needed = "secureJsonData" in ds and (update_token or not token_held)
    if contains(held, visible) and not token_needed:
        result.add("datasource", uid, "unchanged")
        return
    if held.get("readOnly"):
        raise _refuse("datasource", uid, "provisioned from a file (read-only)")
    api.datasource.update_datasource_by_uid(uid, ds)
    result.add("datasource", uid, "updated")


def _dashboard(api: Any, board: dict[str, Any], result: PushResult) -> None:
    uid = board["uid"]
    held = _get(api.dashboard.get_dashboard, uid)
    if held is not None:
        meta = held.get("meta") or {}
        if contains(held.get("dashboard"), board) and meta.get("folderUid") == FOLDER_UID:
            result.add("dashboard", uid, "unchanged")
            return
        if meta.get("provisioned"):
            raise _refuse("dashboard", uid, "provisioned from a file")
    api.dashboard.update_dashboard({"dashboard": {**board, "id": None},
                                    "folderUid": FOLDER_UID, "overwrite": True,
                                    "message": "perfcast grafana push"})
    result.add("dashboard", uid, "created" if held is None else "updated")


def _rule(api: Any, rule: dict[str, Any], result: PushResult) -> None:
    uid = rule["uid"]
    held = _get(api.alertingprovisioning.get_alertrule, uid)
    if held is None:
        api.alertingprovisioning.create_alertrule(rule)
        result.add("alert rule", uid, "created")
    elif contains(held, rule):
        result.add("alert rule", uid, "unchanged")
    elif held.get("provenance") == "file":
        raise _refuse("alert rule", uid, "provisioned from a file")
    else:
        api.alertingprovisioning.update_alertrule(uid, rule)
        result.add("alert rule", uid, "updated")


def _rule_group(api: Any, wanted: set[str], result: PushResult) -> None:
    """Delete the group's rules perfcast no longer generates; set its interval."""
    group = _get(api.alertingprovisioning.get_rule_group, FOLDER_UID, GROUP)
    if group is None:
        return
    kept = []
    for held in group.get("rules") or []:
        if held.get("uid") in wanted:
            kept.append(held)
        else:
            api.alertingprovisioning.delete_alertrule(held["uid"])
            result.add("alert rule", held["uid"], "deleted")
    if group.get("interval") != INTERVAL_S:
        api.alertingprovisioning.update_rule_group(
            FOLDER_UID, GROUP, {"title": GROUP, "folderUid": FOLDER_UID,
                                "interval": INTERVAL_S, "rules": kept})
        result.add("rule group", GROUP, "updated")
    else:
        result.add("rule group", GROUP, "unchanged")


def push(api: Any, *, datasource: dict[str, Any], dashboards: list[dict[str, Any]],
         rules: list[dict[str, Any]], update_token: bool = False) -> PushResult:
    """Upsert everything (module docstring); :class:`PushError` names an object Grafana
    refused."""
    from grafana_client.client import GrafanaException

    result = PushResult()
    try:
        _folder(api, result)
        _datasource(api, datasource, update_token, result)
        for board in dashboards:
            _dashboard(api, board, result)
        for rule in rules:
            _rule(api, rule, result)
        _rule_group(api, {r["uid"] for r in rules}, result)
    except GrafanaException as err:
        done = ", ".join(f"{k} {u} {a}" for k, u, a in result.actions) or "nothing"
        raise PushError(f"Grafana answered {err.status_code or 'no response'}: "
                        f"{err.message} (done before: {done})") from None
    except OSError as err:                     # connection refused, DNS, TLS ...
        raise PushError(f"cannot reach Grafana: {err}") from None
    return result
