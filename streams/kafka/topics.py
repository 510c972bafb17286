"""The perfcast topics and their creation (kafka-python admin client)."""

from __future__ import annotations

import logging

from streams.core.config import KafkaSettings

__all__ = ["TOPICS", "ensure_topics"]

log = logging.getLogger("perfcast.topics")

#: the pipeline's topics (prefixed by ``KafkaSettings.topic_prefix``)
TOPICS = ("windows", "estimates", "predictions", "alerts", "deadletter")


def ensure_topics(settings: KafkaSettings, partitions: int = 4,
                  replication: int = 1) -> list[str]:
    """Create the topics that do not exist yet; returns the ones created.

    :class:`streams.kafka.connect.Unreachable` when no broker answers within
    ``settings.connect_timeout_s`` (the first thing ``produce`` and ``worker`` do)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    from streams.kafka.connect import Unreachable, bounded_bootstrap, quiet_kafka_logs
    from streams.kafka.produce import kafka_client_options

    timeout = settings.connect_timeout_s
    try:
        with quiet_kafka_logs():
            admin = KafkaAdminClient(**kafka_client_options(settings), client_id="perfcast-admin",
                                     **bounded_bootstrap(KafkaAdminClient, timeout))
    except KafkaError as exc:
        raise Unreachable(f"Kafka at {settings.bootstrap} did not answer within {timeout:g} s "
                          f"({type(exc).__name__}); check --bootstrap / "
                          f"PERFCAST_KAFKA_BOOTSTRAP, or raise --connect-timeout") from None
    try:
        existing = set(admin.list_topics())
        wanted = [settings.topic(t) for t in TOPICS if settings.topic(t) not in existing]
        created = []
        for name in wanted:
            try:
                admin.create_topics([NewTopic(name, partitions, replication)])
                created.append(name)
            except TopicAlreadyExistsError:
                pass
        if created:
            log.info("created topics %s", created)
        return created
    finally:
        admin.close()

