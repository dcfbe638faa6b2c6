//! The catalogue of sensitive paths: what makes CI, a build, a hook or an
//! editor run code, or decides who reviews and what an agent is told.
//! This table is the only list in code; `docs/security.md` shows the same
//! table, and a test checks that the two agree row for row.

use std::sync::LazyLock;

use super::glob::Glob;

/// One row: a path pattern (see [`super::glob`]), what it is, why a
/// change there matters, a path it matches, and what of it is watched.
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    pub pattern: &'static str,
    pub what: &'static str,
    pub why: &'static str,
    pub example: &'static str,
    pub watch: Watch,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Watch {
    /// Any change to the file (content or executable bit).
    WholeFile,
    /// A TOML file where only these keys run code: a change to what they
    /// hold is sensitive, and so is a version that does not parse. `*`
    /// stands for any one key (`target.*.build-dependencies`).
    Keys(&'static [&'static str]),
}

const fn row(
    pattern: &'static str,
    what: &'static str,
    why: &'static str,
    example: &'static str,
) -> Rule {
    Rule {
        pattern,
        what,
        why,
        example,
        watch: Watch::WholeFile,
    }
}

/// A dependency runs code at build time too (its build script, its proc
/// macros), so what the dependency tables hold is watched with the
/// build keys: adding or changing a dependency needs a maintainer's yes.
const CARGO_BUILD_KEYS: &[&str] = &[
    "package.build",
    "package.links",
    "lib.proc-macro",
    "lib.proc_macro",
    "build-dependencies",
    "build_dependencies",
    "target.*.build-dependencies",
    "target.*.build_dependencies",
    "dependencies",
    "dev-dependencies",
    "dev_dependencies",
    "target.*.dependencies",
    "target.*.dev-dependencies",
    "target.*.dev_dependencies",
    "workspace.dependencies",
    "patch",
    "replace",
    // Where targets' sources are: a path may leave the crate.
    "lib",
    "bin",
    "test",
    "bench",
    "example",
];

const PYPROJECT_BUILD_KEYS: &[&str] = &[
    "build-system",
    "project.dependencies",
    "project.optional-dependencies",
    "dependency-groups",
    "tool.pytest",
    "tool.setuptools.cmdclass",
    "tool.hatch.build",
    "tool.hatch.envs",
    "tool.hatch.metadata",
    "tool.poetry.build",
    "tool.poetry.dependencies",
    "tool.poetry.group",
    "tool.tox",
    "tool.nox",
    "tool.poe",
    "tool.pdm",
    "tool.cibuildwheel",
    "tool.uv",
    // Tools that load plugins or run hooks named here.
    "project.entry-points",
    "project.scripts",
    "tool.setuptools.dynamic",
    "tool.hatch.version",
    "tool.pylint",
    "tool.mypy",
    "tool.coverage",
    "tool.taskipy",
    "tool.pixi",
    "tool.rye",
];

/// Run on pushes and pull requests, or by the forge, with the
/// repository's secrets.
const CI: &str = "runs in CI with the repository's secrets";

pub static CATALOGUE: &[Rule] = &[
    // CI definitions.
    row(".github/workflows/**", "GitHub Actions workflows", CI, ".github/workflows/ci.yml"),
    row(
        ".github/actions/**",
        "local GitHub actions",
        "workflows run them with `uses: ./.github/actions/...`",
        ".github/actions/setup/action.yml",
    ),
    row(
        "**/action.{yml,yaml}",
        "an action's definition, anywhere",
        "a workflow can run any directory holding one with `uses: ./dir`",
        "tools/release/action.yml",
    ),
    row(".gitea/{workflows,actions}/**", "Gitea Actions workflows and actions", CI, ".gitea/workflows/ci.yml"),
    row(".forgejo/{workflows,actions}/**", "Forgejo Actions workflows and actions", CI, ".forgejo/workflows/ci.yml"),
    row(".gitlab-ci.yml", "GitLab CI", CI, ".gitlab-ci.yml"),
    row(
        ".gitlab/**",
        "GitLab CI includes and templates, GitLab's CODEOWNERS",
        "`.gitlab-ci.yml` includes them; `.gitlab/CODEOWNERS` decides who must review",
        ".gitlab/ci/test.yml",
    ),
    row(".woodpecker.{yml,yaml}", "Woodpecker CI", CI, ".woodpecker.yml"),
    row(".woodpecker/**", "Woodpecker CI workflows", CI, ".woodpecker/test.yml"),
    row(".drone.{yml,yaml,jsonnet,star}", "Drone CI", CI, ".drone.yml"),
    row(".circleci/**", "CircleCI", CI, ".circleci/config.yml"),
    row(".travis.yml", "Travis CI", CI, ".travis.yml"),
    row("azure-pipelines.{yml,yaml}", "Azure Pipelines", CI, "azure-pipelines.yml"),
    row(".azure-pipelines/**", "Azure Pipelines templates", CI, ".azure-pipelines/build.yml"),
    row("bitbucket-pipelines.yml", "Bitbucket Pipelines", CI, "bitbucket-pipelines.yml"),
    row(
        "**/Jenkinsfile*",
        "Jenkins pipelines, anywhere",
        "a multibranch job runs the branch's own Jenkinsfile",
        "ci/Jenkinsfile",
    ),
    row(".buildkite/**", "Buildkite pipelines and hooks", CI, ".buildkite/pipeline.yml"),
    row("{appveyor,.appveyor}.yml", "AppVeyor", CI, "appveyor.yml"),
    row(".cirrus.{yml,star}", "Cirrus CI", CI, ".cirrus.yml"),
    row(".semaphore/**", "Semaphore CI", CI, ".semaphore/semaphore.yml"),
    row(
        ".devcontainer/**",
        "dev container definitions",
        "Codespaces and editors run their lifecycle commands (`postCreateCommand`)",
        ".devcontainer/devcontainer.json",
    ),
    row(
        ".devcontainer.json",
        "a dev container definition",
        "Codespaces and editors run its lifecycle commands",
        ".devcontainer.json",
    ),
    row(".gitpod.yml", "Gitpod tasks", "run when a workspace opens", ".gitpod.yml"),
    // Git and review configuration.
    row(
        "**/.gitattributes",
        "git attributes, anywhere",
        "name filter and diff drivers; `linguist-generated` hides files from review",
        "docs/.gitattributes",
    ),
    row(".gitmodules", "submodule URLs", "where clones fetch submodules from", ".gitmodules"),
    row(".lfsconfig", "Git LFS configuration", "where clones fetch large files from", ".lfsconfig"),
    row("CODEOWNERS", "code owners", "decides who must review", "CODEOWNERS"),
    row(
        "{.github,.gitea,.forgejo,docs}/CODEOWNERS",
        "code owners",
        "decides who must review",
        ".github/CODEOWNERS",
    ),
    row(
        ".github/settings.yml",
        "repository settings (the Settings app)",
        "applied on push: branch protection, collaborators",
        ".github/settings.yml",
    ),
    // Instructions to agents, and their tools' configuration.
    row(
        "**/AGENTS.md",
        "instructions to AI agents, anywhere",
        "agents follow them, this one included",
        "AGENTS.md",
    ),
    row("**/CLAUDE.md", "instructions to Claude, anywhere", "agents follow them", "CLAUDE.md"),
    row("**/GEMINI.md", "instructions to Gemini, anywhere", "agents follow them", "GEMINI.md"),
    row(
        ".claude/**",
        "Claude Code settings, commands and hooks",
        "hooks there run shell commands",
        ".claude/settings.json",
    ),
    row(
        ".mcp.json",
        "MCP servers of the project",
        "agents start the commands it names",
        ".mcp.json",
    ),
    row(
        ".github/copilot-instructions.md",
        "instructions to Copilot",
        "agents follow them",
        ".github/copilot-instructions.md",
    ),
    row(
        ".github/instructions/**",
        "path-specific instructions to Copilot",
        "agents follow them",
        ".github/instructions/rust.instructions.md",
    ),
    row(".cursorrules", "instructions to Cursor", "agents follow them", ".cursorrules"),
    row(
        ".cursor/**",
        "Cursor rules and MCP servers",
        "agents follow the rules and start the servers",
        ".cursor/rules/style.mdc",
    ),
    row(
        "{.clinerules,.windsurfrules}/**",
        "instructions to Cline and Windsurf",
        "agents follow them",
        ".clinerules",
    ),
    row(
        ".forgehand.toml",
        "this bot's settings for the repository",
        "steers Forgehand itself",
        ".forgehand.toml",
    ),
    // Hooks.
    row(".husky/**", "Husky git hooks", "run on developers' machines on commit and push", ".husky/pre-commit"),
    row(".githooks/**", "a shared hooks directory", "run on developers' machines once `core.hooksPath` names it", ".githooks/pre-push"),
    row(
        "{lefthook,.lefthook}{,-local}.{yml,yaml,json,toml}",
        "Lefthook hooks",
        "run on developers' machines on commit and push",
        "lefthook.yml",
    ),
    row(".lefthook/**", "Lefthook hook scripts", "run on developers' machines on commit and push", ".lefthook/pre-commit/lint.sh"),
    row(
        ".pre-commit-config.yaml",
        "pre-commit hooks",
        "run on commit and in CI (pre-commit.ci)",
        ".pre-commit-config.yaml",
    ),
    row(".overcommit.yml", "Overcommit hooks", "run on developers' machines on commit", ".overcommit.yml"),
    row(
        "{.lintstagedrc*,lint-staged.config.*}",
        "lint-staged",
        "runs its commands on every commit",
        ".lintstagedrc.json",
    ),
    // Editors.
    row(
        ".vscode/**",
        "VS Code workspace settings and tasks",
        "tasks can run when the folder opens; settings name executables",
        ".vscode/tasks.json",
    ),
    row(
        "**/*.code-workspace",
        "VS Code workspace files",
        "hold settings and tasks like `.vscode/`",
        "project.code-workspace",
    ),
    row(
        ".idea/**",
        "JetBrains project settings and run configurations",
        "name the programs the IDE runs",
        ".idea/workspace.xml",
    ),
    row("**/.envrc", "direnv", "runs when a shell enters the directory", ".envrc"),
    row(
        "**/{.exrc,.nvimrc,.nvim.lua}",
        "vim and neovim local configuration",
        "runs when the editor opens there (`exrc`)",
        ".nvim.lua",
    ),
    row("**/.dir-locals.el", "Emacs directory variables", "can `eval` code when a file opens", ".dir-locals.el"),
    // Build entry points, anywhere.
    row(
        "**/{GNUmakefile,makefile,Makefile}",
        "makefiles, anywhere",
        "a build entry point: runs on every build",
        "src/GNUmakefile",
    ),
    row("**/*.mk", "makefile fragments", "included by makefiles", "rules/common.mk"),
    row("**/{CMakeLists.txt,*.cmake}", "CMake", "a build entry point: runs on every build", "CMakeLists.txt"),
    row("**/meson.build", "Meson", "a build entry point: runs on every build", "meson.build"),
    row(
        "**/{configure,configure.ac,configure.in,Makefile.am,Makefile.in}",
        "autotools inputs",
        "a build entry point: runs on every build",
        "configure.ac",
    ),
    row("**/build.rs", "Cargo build scripts", "run on every build", "crates/x/build.rs"),
    Rule {
        pattern: "**/Cargo.toml",
        what: "Cargo manifests: their build keys",
        why: "name a build script, proc macros, dependencies (their build scripts and proc macros run too), or replace where crates come from",
        example: "crates/x/Cargo.toml",
        watch: Watch::Keys(CARGO_BUILD_KEYS),
    },
    row(
        "**/.cargo/config{,.toml}",
        "Cargo configuration, anywhere",
        "`rustc-wrapper`, runners, aliases and environment for every build under it",
        ".cargo/config.toml",
    ),
    row(
        "**/rust-toolchain{,.toml}",
        "the Rust toolchain",
        "a `path` makes any directory's binaries the compiler",
        "rust-toolchain.toml",
    ),
    row("**/package.json", "npm packages", "scripts run on install, test and build", "web/package.json"),
    row(
        "**/{.npmrc,.yarnrc,.yarnrc.yml}",
        "npm and Yarn configuration",
        "registries, `script-shell`, `yarnPath` (a program Yarn runs)",
        ".yarnrc.yml",
    ),
    row("**/.pnpmfile.{cjs,mjs}", "pnpm hooks", "code run on install", ".pnpmfile.cjs"),
    row(
        "**/.yarn/{releases,plugins}/**",
        "Yarn releases and plugins",
        "the code Yarn runs",
        ".yarn/releases/yarn-4.1.0.cjs",
    ),
    row("**/{setup.py,setup.cfg}", "setuptools", "runs on install and build", "setup.py"),
    Rule {
        pattern: "**/pyproject.toml",
        what: "Python project files: their build and test keys",
        why: "name the build backend, the dependencies (an sdist's build runs), options and plugins pytest and tox run, and task runners' tasks",
        example: "pyproject.toml",
        watch: Watch::Keys(PYPROJECT_BUILD_KEYS),
    },
    row("**/conftest.py", "pytest configuration code", "pytest imports it before any test", "tests/conftest.py"),
    row(
        "**/{noxfile.py,tox.ini,pytest.ini}",
        "nox sessions, tox environments, pytest options",
        "name what the test runner runs (`-p` loads plugins)",
        "noxfile.py",
    ),
    row(
        "**/{Rakefile,*.rake,Gemfile,*.gemspec}",
        "Rake tasks, Bundler's Gemfile, gem specifications",
        "Ruby code run by rake and by bundler",
        "Rakefile",
    ),
    row(
        "**/{build.gradle,build.gradle.kts,settings.gradle,settings.gradle.kts,gradle.properties,init.gradle}",
        "Gradle build scripts and properties",
        "run on every build; properties set the JVM's arguments",
        "app/build.gradle.kts",
    ),
    row(
        "**/{gradlew,gradlew.bat,gradle-wrapper.properties,gradle-wrapper.jar}",
        "the Gradle wrapper",
        "downloads and runs the distribution it names",
        "gradle/wrapper/gradle-wrapper.properties",
    ),
    row("**/buildSrc/**", "Gradle buildSrc", "compiled and run by every build", "buildSrc/src/main/kotlin/x.kt"),
    row("**/{pom.xml,mvnw,mvnw.cmd}", "Maven", "plugins run on every build", "pom.xml"),
    row("**/.mvn/**", "Maven extensions, JVM options, wrapper", "run on every build", ".mvn/extensions.xml"),
    row(
        "**/{BUILD,BUILD.bazel,WORKSPACE,WORKSPACE.bazel,MODULE.bazel,.bazelrc,*.bzl}",
        "Bazel",
        "a build entry point: runs on every build",
        "tools/defs.bzl",
    ),
    row(
        "**/{.bazeliskrc,.bazelversion}",
        "Bazelisk configuration",
        "where the Bazel binary Bazelisk runs comes from, and which",
        ".bazeliskrc",
    ),
    row("**/{justfile,.justfile}", "just recipes", "what `just` runs", "justfile"),
    row("**/Taskfile{,.dist}.{yml,yaml}", "Task", "what `task` runs", "Taskfile.yml"),
    row(
        "**/Directory.Build.{props,targets}",
        "MSBuild directory files",
        "imported into every project under them",
        "Directory.Build.props",
    ),
    row(
        "**/{mise.toml,.mise.toml,mise.local.toml,.mise.local.toml,.tool-versions}",
        "mise and asdf",
        "tasks, enter hooks, and the tools (and their versions) put on the path",
        "mise.toml",
    ),
    row("**/{.mise,mise}/**", "mise task and configuration directories", "tasks mise runs", ".mise/tasks/test.sh"),
    row(
        "**/{flake.nix,shell.nix,default.nix,devenv.nix,devbox.json}",
        "Nix and devbox environments",
        "`shellHook` and build steps run on entering the environment or building",
        "flake.nix",
    ),
    row(
        "**/{go.mod,go.work}",
        "Go modules and workspaces",
        "`replace`, `require` and `toolchain` say what code and which compiler a build uses",
        "go.mod",
    ),
    row(
        "**/{requirements*.txt,constraints*.txt,Pipfile}",
        "pip requirements and Pipfiles",
        "what `pip install` fetches and builds (an sdist's setup runs)",
        "requirements-dev.txt",
    ),
    row(
        "**/{tasks.py,fabfile.py}",
        "invoke and Fabric tasks",
        "what `invoke` and `fab` run",
        "tasks.py",
    ),
    row(
        "**/{Vagrantfile,Procfile,.rspec,.rspec-local}",
        "Vagrant, Procfile runners, RSpec options",
        "Ruby code or commands run by `vagrant`, `foreman` and `rspec` (`--require`)",
        "Vagrantfile",
    ),
    // Containers: CI builds and runs them.
    row(
        "**/{Dockerfile,Dockerfile.*,*.Dockerfile,Containerfile,Containerfile.*,Earthfile}",
        "container build files",
        "`RUN` lines run when CI builds the image",
        "docker/Dockerfile",
    ),
    row(
        "**/{docker-compose,compose}{,.*}.{yml,yaml}",
        "Compose files",
        "name the images, commands and mounts `docker compose` runs",
        "docker-compose.yml",
    ),
    // JavaScript tools execute their configuration.
    row(
        "**/{gulpfile,Gruntfile}{,.*}.{js,cjs,mjs,ts,cts,mts,coffee}",
        "gulp and Grunt",
        "a build entry point: runs on every build",
        "gulpfile.js",
    ),
    row(
        "**/*.config.{js,cjs,mjs,ts,cts,mts}",
        "JavaScript tools' configuration code (jest, vite, webpack, eslint, babel, …)",
        "the tool imports and runs it on every test, build or lint",
        "web/vite.config.ts",
    ),
    row(
        "**/.*rc.{js,cjs,mjs,ts}",
        "JavaScript tools' rc files (`.eslintrc.js`, `.babelrc.js`, `.mocharc.js`, …)",
        "the tool imports and runs it",
        ".eslintrc.cjs",
    ),
    row(
        "**/{renovate.json,renovate.json5,.renovaterc,.renovaterc.json,.renovaterc.json5}",
        "Renovate configuration",
        "self-hosted Renovate runs its `postUpgradeTasks`",
        ".github/renovate.json",
    ),
    row(
        ".github/dependabot.{yml,yaml}",
        "Dependabot configuration",
        "names the registries dependencies are fetched from",
        ".github/dependabot.yml",
    ),
    // Other CI, build and deploy services.
    row("{.build.yml,.builds/**}", "SourceHut builds", CI, ".builds/ci.yml"),
    row(
        "{cloudbuild.yaml,cloudbuild.yml,cloudbuild.json,buildspec.yml,buildspec.yaml,codemagic.yaml,bitrise.yml,netlify.toml,vercel.json,Tiltfile,skaffold.yaml,docker-bake.hcl}",
        "Cloud Build, CodeBuild, Codemagic, Bitrise, Netlify, Vercel, Tilt, Skaffold, Bake",
        "build and deploy steps run by the service",
        "cloudbuild.yaml",
    ),
    row(
        "{.teamcity,.tekton,.kokoro,.zuul.d,zuul.d,fastlane}/**",
        "TeamCity, Tekton, Kokoro, Zuul and fastlane directories",
        CI,
        ".tekton/pr.yaml",
    ),
    row("{.zuul.yaml,zuul.yaml}", "Zuul", CI, ".zuul.yaml"),
    row("**/{Dangerfile,Dangerfile.*,dangerfile.*}", "Danger", "runs on pull requests in CI", "Dangerfile"),
    // Lock files: what an install fetches, and from where.
    row(
        "**/{package-lock.json,npm-shrinkwrap.json,yarn.lock,pnpm-lock.yaml,pnpm-workspace.yaml,bun.lock,bun.lockb,poetry.lock,uv.lock,Pipfile.lock,pdm.lock,Gemfile.lock,composer.lock,flake.lock,Cargo.lock,mix.lock,Package.resolved,Podfile.lock}",
        "lock files",
        "name each package an install fetches and the URL it comes from",
        "web/package-lock.json",
    ),
    // More ecosystems' build files.
    row(
        "**/*.{csproj,fsproj,vbproj,sln,props,targets}",
        "MSBuild projects, solutions, props and targets",
        "a build entry point: targets run on every build",
        "app/app.csproj",
    ),
    row("**/{NuGet.config,nuget.config,global.json}", ".NET package sources and SDK", "where packages and the SDK come from", "NuGet.config"),
    row(
        "**/{build.sbt,build.xml,*.gradle,*.gradle.kts,*.versions.toml}",
        "sbt, Ant, Gradle scripts and version catalogues",
        "a build entry point: runs on every build",
        "gradle/publish.gradle",
    ),
    row(
        "{**/project/*.sbt,**/project/*.scala,**/project/build.properties,**/build-logic/**}",
        "sbt project definitions, Gradle build logic",
        "compiled and run by every build",
        "project/plugins.sbt",
    ),
    row(
        "**/{composer.json,phpunit.xml,phpunit.xml.dist,.php-cs-fixer.php,.php-cs-fixer.dist.php,mix.exs,.formatter.exs,rebar.config,rebar.config.script,Package.swift,build.zig,build.zig.zon,Makefile.PL,Build.PL,Makevars,cpanfile,.Rprofile,*.opam,config.nims,*.nimble,*.rockspec,conanfile.py,conanfile.txt,binding.gyp}",
        "PHP, Elixir, Erlang, Swift, Zig, Perl, R, OCaml, Nim, Lua, Conan and node-gyp builds",
        "code the build or the test runner runs",
        "composer.json",
    ),
    row(
        "**/{Makefile.inc,BSDmakefile,Kbuild,*.m4,CMakePresets.json,CMakeUserPresets.json,Makefile.toml,REPO.bazel,WORKSPACE.bzlmod,*.bazelrc}",
        "more make, autotools, CMake, cargo-make and Bazel inputs",
        "a build entry point: runs on every build",
        "aclocal.m4",
    ),
    row(
        "**/{Podfile,Brewfile,Guardfile,Capfile,.irbrc,.rubocop.yml,.bundle/config,devenv.yaml,bunfig.toml,deno.json,deno.jsonc,.config/nextest.toml,deps/build.jl}",
        "CocoaPods, Homebrew bundles, Guard, Capistrano, irb, RuboCop, Bundler, devenv, Bun, Deno, nextest, Julia builds",
        "Ruby, shell or build code these tools run",
        "Brewfile",
    ),
    row(
        "**/{hatch_build.py,pdm_build.py,.pylintrc,pylintrc,mypy.ini,.coveragerc,.pdbrc,sitecustomize.py,usercustomize.py}",
        "Python build hooks and tools' rc files",
        "Python code the build, pylint (`init-hook`), mypy and coverage (plugins) or the interpreter run",
        ".pylintrc",
    ),
    row(
        "**/{karma.conf,wdio.conf,protractor.conf,vitest.workspace,.eleventy}.{js,cjs,mjs,ts}",
        "JavaScript test runners' and site builders' configuration code",
        "the tool imports and runs it",
        "karma.conf.js",
    ),
    row(
        "**/{.babelrc,.mocharc,.eslintrc,.prettierrc,.swcrc}{,.json,.jsonc,.yml,.yaml}",
        "JavaScript tools' declarative configuration",
        "names plugins and modules the tool loads and runs (`require`)",
        ".mocharc.yml",
    ),
    row("**/{babel.config,jest.config}.json", "Babel and Jest JSON configuration", "names plugins and modules the tool loads", "jest.config.json"),
    row(
        "**/{.storybook,cypress/plugins,.yarn/patches}/**",
        "Storybook, Cypress plugins, Yarn patches",
        "code the tool runs, or changes to the packages it installs",
        ".storybook/main.js",
    ),
    row("**/.pnp.{cjs,js,loader.mjs}", "Yarn Plug'n'Play loader", "Node runs it before anything else", ".pnp.cjs"),
    row("**/{mise,.mise}.*.toml", "mise environment files", "tasks and hooks like `mise.toml`", "mise.dev.toml"),
    row("**/.env", "dotenv files", "tools load them into the environment (`NODE_OPTIONS`, `PYTHONSTARTUP`)", ".env"),
    // Other agents' instructions and tools.
    row(
        "{.gemini,.roo,.kiro,.amazonq,.junie,.codex,.continue,.zed,.github/prompts,.github/chatmodes}/**",
        "other coding agents' and editors' settings, MCP servers and prompts",
        "what an agent or editor is told and which programs it starts",
        ".gemini/settings.json",
    ),
    row(
        "{.roomodes,.aider.conf.yml,CONVENTIONS.md,opencode.json,.goosehints}",
        "other coding agents' instructions",
        "what an agent is told",
        ".aider.conf.yml",
    ),
    row("**/*.sublime-project", "Sublime Text projects", "build systems the editor runs", "x.sublime-project"),
    // The fourth red team's siblings.
    row(
        "{.gitlab-ci.d/**,wercker.yml,.screwdriver.yaml,.harness/**,ci/pipeline.yml,dagger.json,.dagger/**}",
        "more CI definitions (GitLab includes, Wercker, Screwdriver, Harness, Concourse, Dagger)",
        CI,
        ".harness/pipeline.yaml",
    ),
    row(
        "**/{.goreleaser.yaml,.goreleaser.yml,goreleaser.yaml,goreleaser.yml,.releaserc,.releaserc.*,.release-it.*,cliff.toml,.bumpversion.cfg,.cz.toml,cz.toml}",
        "release tools (GoReleaser, semantic-release, release-it, git-cliff, bumpversion, commitizen)",
        "run hooks in CI with the tokens that publish releases",
        ".goreleaser.yaml",
    ),
    row(".changeset/config.json", "Changesets", "names the code that writes changelogs in CI", ".changeset/config.json"),
    row("**/*.pth", "Python path files", "the interpreter runs their `import` lines at every start", "evil.pth"),
    row(
        "{install.sh,**/bootstrap.sh,**/autogen.sh,.pre-commit-hooks.yaml}",
        "install and bootstrap scripts, pre-commit hook definitions",
        "what developers and CI run first",
        "autogen.sh",
    ),
    row(
        "**/{meson_options.txt,meson.options,SConstruct,SConscript,wscript,nodemon.json,lerna.json,nx.json,turbo.json}",
        "Meson options, SCons, waf, nodemon, Lerna, Nx and Turborepo",
        "a build entry point, or the commands a task runner runs",
        "SConstruct",
    ),
    row("**/*.config.*.{js,cjs,mjs,ts}", "JavaScript tools' configuration code with a loader", "the tool runs it (`webpack.config.babel.js`)", "webpack.config.babel.js"),
    row(
        "**/{.sdkmanrc,.nvmrc,.node-version,.ruby-version,.python-version,.java-version}",
        "interpreter and SDK pins",
        "which toolchain version managers install and put on the path",
        ".nvmrc",
    ),
    row("{.replit,replit.nix,.helix/**}", "Replit and Helix", "commands and language servers they run", ".replit"),
    row(
        "{app.json,fly.toml,render.yaml,railway.json,railway.toml,nixpacks.toml,helmfile.yaml,Procfile.*}",
        "deploy platforms (Heroku, Fly, Render, Railway, Nixpacks, Helmfile)",
        "build, release and deploy commands the platform runs",
        "fly.toml",
    ),
    row(
        "{.windsurf,.trae,.openhands,.qwen,.kilocode}/**",
        "more coding agents' rules, MCP servers and setup scripts (OpenHands runs `.openhands/setup.sh`)",
        "what an agent is told and which programs it starts",
        ".openhands/setup.sh",
    ),
    row(
        "{**/AGENT.md,QWEN.md,CRUSH.md,.crush.json,.augment-guidelines}",
        "more coding agents' instructions",
        "what an agent is told",
        "AGENT.md",
    ),
];

/// Paths in the git directory: changed there, they are tamper.
pub(crate) const GIT_INTERNAL: &[(&str, &str)] = &[
    (
        "config",
        "git configuration: can name programs git runs and where it fetches",
    ),
    ("hooks/**", "a git hook: code git runs"),
    ("info/**", "git's own files"),
    (
        "objects/info/alternates",
        "points git at objects outside this repository",
    ),
    (
        "objects/info/http-alternates",
        "points git at objects outside this repository",
    ),
    ("commondir", "points git at objects outside this repository"),
    ("HEAD", "what the host's commit is made on"),
    ("index", "what the host commits"),
    ("modules/**", "a submodule's git directory"),
    ("worktrees/**", "another working tree's git directory"),
];

static GLOBS: LazyLock<Vec<Glob>> =
    LazyLock::new(|| CATALOGUE.iter().map(|r| Glob::new(r.pattern)).collect());

static GIT_GLOBS: LazyLock<Vec<Glob>> =
    LazyLock::new(|| GIT_INTERNAL.iter().map(|(p, _)| Glob::new(p)).collect());

/// The first row whose pattern matches `rel`.
pub fn rule_for(rel: &str) -> Option<&'static Rule> {
    CATALOGUE
        .iter()
        .zip(GLOBS.iter())
        .find(|(_, glob)| glob.matches(rel))
        .map(|(rule, _)| rule)
}

/// The first row that `rel` is a directory on the way to.
pub(crate) fn rule_through(rel: &str) -> Option<&'static Rule> {
    CATALOGUE
        .iter()
        .zip(GLOBS.iter())
        .find(|(_, glob)| glob.leads_to(rel))
        .map(|(rule, _)| rule)
}

/// Why `rel` in the git directory is watched, if it is.
pub(crate) fn git_reason(rel: &str) -> Option<&'static str> {
    GIT_INTERNAL
        .iter()
        .zip(GIT_GLOBS.iter())
        .find(|(_, glob)| glob.matches(rel) || glob.leads_to(rel))
        .map(|((_, why), _)| *why)
}

/// The catalogue as the Markdown table `docs/security.md` shows.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| Pattern | What | Why | Example | Watched |\n| --- | --- | --- | --- | --- |\n",
    );
    for rule in CATALOGUE {
        let watched = match rule.watch {
            Watch::WholeFile => "the whole file".to_owned(),
            Watch::Keys(keys) => {
                let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
                format!("keys {}", keys.join(", "))
            }
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | `{}` | {watched} |\n",
            rule.pattern, rule.what, rule.why, rule.example
        ));
    }
    out
}

/// Whether the catalogue held a change to `rel` with these two versions
/// (`None` where the file is not): the boundary before the allow-list
/// (issue 25), kept for measuring the allow-list against it
/// (`gate/examples/friction.rs`).
pub fn catalogue_holds(rel: &str, old: Option<&[u8]>, new: Option<&[u8]>) -> bool {
    let Some(rule) = rule_for(rel) else {
        return false;
    };
    match rule.watch {
        Watch::WholeFile => true,
        Watch::Keys(selectors) => match (old, new) {
            (Some(old), Some(new)) => {
                let (a, b) = (
                    super::keys::select(old, selectors),
                    super::keys::select(new, selectors),
                );
                a != b || a == super::keys::Keys::Unparsable || b == super::keys::Keys::Unparsable
            }
            _ => true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_selects_its_own_row() {
        for rule in CATALOGUE {
            assert_eq!(rule_for(rule.example), Some(rule), "{}", rule.example);
        }
    }

    #[test]
    fn ordinary_paths_are_not_in_the_catalogue() {
        for path in [
            "src/main.rs",
            "README.md",
            "docs/guide.md",
            "tests/test_api.py",
            "web/src/index.ts",
            "lib/x.rb",
            ".gitignore",
            ".github/ISSUE_TEMPLATE/bug.md",
            "myapp/project/settings.py",
            "src/env.ts",
            "config/settings.yaml",
            "web/src/app.config.json",
            "docs/build/index.md",
            "go.sum",
        ] {
            assert_eq!(rule_for(path), None, "{path}");
        }
    }

    #[test]
    fn the_documented_table_is_this_table() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
                .unwrap();
        let start = "<!-- catalogue: start -->\n";
        let end = "<!-- catalogue: end -->";
        let table = docs
            .split_once(start)
            .and_then(|(_, rest)| rest.split_once(end))
            .map(|(table, _)| table)
            .unwrap_or_else(|| {
                panic!(
                    "docs/security.md holds the catalogue between its markers:\n{}",
                    markdown_table()
                )
            });
        let documented: Vec<&str> = table.lines().filter(|l| !l.is_empty()).collect();
        let code = markdown_table();
        let coded: Vec<&str> = code.lines().collect();
        for (n, (doc, row)) in documented.iter().zip(&coded).enumerate() {
            assert_eq!(doc, row, "row {n} differs; the table in code is:\n{code}");
        }
        assert_eq!(
            documented.len(),
            coded.len(),
            "rows in docs vs code; the table in code is:\n{code}"
        );
    }
}
