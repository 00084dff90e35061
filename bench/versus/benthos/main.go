// Benthos v4.27.0 (MIT), the last release of github.com/benthosdev/benthos before the
// project moved, with the components bench/versus runs: kafka_franz, elasticsearch,
// sql_insert (lib/pq), generate, mapping. `go build` in this directory makes the binary.
package main

import (
	"context"

	_ "github.com/benthosdev/benthos/v4/public/components/elasticsearch"
	_ "github.com/benthosdev/benthos/v4/public/components/io"
	_ "github.com/benthosdev/benthos/v4/public/components/kafka"
	_ "github.com/benthosdev/benthos/v4/public/components/pure"
	_ "github.com/benthosdev/benthos/v4/public/components/sql"
	"github.com/benthosdev/benthos/v4/public/service"
)

func main() {
	service.RunCLI(context.Background())
}
