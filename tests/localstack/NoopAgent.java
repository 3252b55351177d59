// LocalStack starts DynamoDB Local with `-javaagent:ddb-local-loader-0.1.jar`, its patch for more
// than 20 GSIs, which it would download. The table has two, so an agent that does nothing
// stands in for it (./start builds it).
public final class NoopAgent {
    public static void premain(String args, java.lang.instrument.Instrumentation instrumentation) {}
}
