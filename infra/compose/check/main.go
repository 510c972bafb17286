// composecheck loads a docker-compose file the way `docker compose` does -- with compose-go,
// the Compose Specification's reference loader that Docker Compose v2 itself uses --
// interpolating ${VAR} from the given env file only, validating against the Compose schema,
// and prints the resolved project as JSON. No Docker engine is needed.
//
//	composecheck docker-compose.yml .env.example > project.json
//
// Built by infra/compose/install.sh; used by tests/test_compose_spec.py.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: composecheck COMPOSE_FILE ENV_FILE")
		os.Exit(2)
	}
	file, envFile := os.Args[1], os.Args[2]
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory(filepath.Dir(file)),
		cli.WithEnvFiles(envFile),
		cli.WithDotEnv,
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "options:", err)
		os.Exit(1)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := project.MarshalJSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, "json:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
