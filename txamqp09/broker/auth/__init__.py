"""Authentication and authorization for the broker.

=============================  ================================================
module                         what it holds
=============================  ================================================
:mod:`.passwords`              RabbitMQ-compatible salted password hashes
:mod:`.permissions`            configure/write/read regular expressions
:mod:`.realms`                 0-8/0-9 access realms and rights
:mod:`.users`                  the database: users, vhosts, permissions, grants
:mod:`.definitions`            RabbitMQ definitions JSON, in and out
:mod:`.sasl`                   PLAIN, AMQPLAIN, EXTERNAL -> twisted.cred credentials
:mod:`.cred`                   checkers, the realm, the ``IAMQPUser`` avatar
:mod:`.throttle`               slowing down repeated failed logins
:mod:`.tickets`                access.request tickets and their checks
:mod:`.methods`                the per-method permission table, ``AccessGuard``
:mod:`.security`               ``Security``: the one object a connection calls
:mod:`.tls`                    TLS 1.2+ server contexts, client-certificate checks
:mod:`.options`                ``twistd amqp09`` options for all of the above
=============================  ================================================

docs/security.rst explains how they fit together and what the broker does
with them.
"""

from txamqp09.broker.auth.cred import IAMQPUser
from txamqp09.broker.auth.definitions import Definitions, load_definitions
from txamqp09.broker.auth.methods import METHOD_RULES, AccessGuard
from txamqp09.broker.auth.sasl import PeerInfo
from txamqp09.broker.auth.security import Login, Security
from txamqp09.broker.auth.users import UserDatabase

__all__ = [
    "METHOD_RULES",
    "AccessGuard",
    "Definitions",
    "IAMQPUser",
    "Login",
    "PeerInfo",
    "Security",
    "UserDatabase",
    "load_definitions",
]
