// Starts Kroxylicious's proxy (kroxylicious-runtime) from a YAML configuration file, for the bench only:
// kroxylicious-app, which has the real command line, is not on Maven Central.  Run as a single source file:
//   java -cp "$(bash scripts/kroxylicious/fetch.sh)/*" scripts/kroxylicious/KroxyliciousMain.java config.yaml
import io.kroxylicious.proxy.KafkaProxy;
import io.kroxylicious.proxy.config.ConfigParser;
import io.kroxylicious.proxy.internal.config.Features;
import java.nio.file.Files;
import java.nio.file.Path;

public class KroxyliciousMain {
    public static void main(String[] args) throws Exception {
        ConfigParser parser = new ConfigParser();
        var configuration = parser.parseConfiguration(Files.readString(Path.of(args[0])));
        try (KafkaProxy proxy = new KafkaProxy(parser, configuration, Features.defaultFeatures())) {
            proxy.startup();
            System.out.println("kroxylicious: listening");
            proxy.block();
        }
    }
}
