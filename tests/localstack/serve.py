"""Runs LocalStack in host mode with its gateway on the loopback interface only.

LocalStack 4.8's default gateway server (twisted) binds every interface whatever
GATEWAY_LISTEN says (`TCP4ServerEndpoint` without an interface). This wraps that one
constructor so that an endpoint without an interface gets the host GATEWAY_LISTEN names, then
starts LocalStack as `python -m localstack.runtime.main` would. Started by ./start.
"""

import os

from twisted.internet import endpoints

_tcp4 = endpoints.TCP4ServerEndpoint
_host = os.environ["GATEWAY_LISTEN"].rsplit(":", 1)[0]


def _loopback_tcp4(reactor, port, backlog=50, interface=""):
    return _tcp4(reactor, port, backlog=backlog, interface=interface or _host)


endpoints.TCP4ServerEndpoint = _loopback_tcp4

if __name__ == "__main__":
    from localstack.runtime.main import main

    main()
